"""The vLLM adapter's side of KV swap (`VLLMEngine(..., kv_swap=True)`): engine arguments that load
teola's connector (`engines/vllm/kv_connector.py`), the cost numbers measured once the engine runs,
what each call sends, and the connector's counters.

Costs (`engines/kv_swap_choice.SwapCosts`): the swap kernel's bandwidth and fixed cost are measured
by the worker on the engine's own KV caches (`teola_kv_swap_measure`); the prefill cost per token is
the time difference of two one-token prefills (32 and 544 new tokens, or
max_model_len - 1 if shorter; unique cache salts so the
prefix cache holds nothing) over their token difference. Either can be fixed with the `kv_swap_costs`
option (a partial dict overrides the measured fields).
"""

from __future__ import annotations

import itertools
import time
import uuid
from typing import Any

from engines.kvswap.choice import SwapCosts

CONNECTOR = "TeolaSwapConnector"
MODULE = "engines.vllm.kv_connector"
WORKER_EXTENSION = f"{MODULE}.TeolaSwapWorker"
DEFAULT_HOST_BYTES = 2 << 30
CALIBRATION_TOKENS = (32, 544)
_ids = itertools.count()


def check_options(
    name: str, kv_swap: Any, kv_swap_bytes: Any, kv_swap_costs: Any, engine_args: dict[str, Any]
) -> None:
    """ValueError naming the problem for a bad kv_swap option combination."""
    if not isinstance(kv_swap, bool):
        raise ValueError(f"engine {name!r}: option kv_swap must be true or false, got {kv_swap!r}")
    if kv_swap_bytes is not None and (
        not isinstance(kv_swap_bytes, int) or isinstance(kv_swap_bytes, bool) or kv_swap_bytes < 1
    ):
        raise ValueError(
            f"engine {name!r}: option kv_swap_bytes must be a positive number of bytes, got {kv_swap_bytes!r}"
        )
    if kv_swap_costs is not None:
        if not isinstance(kv_swap_costs, dict) or set(kv_swap_costs) - set(SwapCosts.__slots__):
            raise ValueError(
                f"engine {name!r}: option kv_swap_costs must be a dict with some of "
                f"{', '.join(SwapCosts.__slots__)}, got {kv_swap_costs!r}"
            )
        SwapCosts.from_dict({"prefill_s_per_token": 0.0, "swap_bytes_per_s": 1.0, **kv_swap_costs})
    if (kv_swap_bytes is not None or kv_swap_costs is not None) and not kv_swap:
        raise ValueError(f"engine {name!r}: kv_swap_bytes / kv_swap_costs need kv_swap: true")
    if kv_swap and {"kv_transfer_config", "worker_extension_cls"} & set(engine_args):
        raise ValueError(
            f"engine {name!r}: kv_swap sets vLLM's kv_transfer_config and worker_extension_cls; "
            f"do not pass them in engine_args too"
        )


def engine_args(host_bytes: int | None) -> dict[str, Any]:
    """AsyncEngineArgs fields that load the connector with its host-memory bound."""
    from vllm.config import KVTransferConfig

    return {
        "kv_transfer_config": KVTransferConfig(
            kv_connector=CONNECTOR,
            kv_connector_module_path=MODULE,
            kv_role="kv_both",
            kv_connector_extra_config={"host_bytes": int(host_bytes or DEFAULT_HOST_BYTES)},
        ),
        "worker_extension_cls": WORKER_EXTENSION,
    }


async def measure_costs(
    engine: Any, token_id: int, override: dict[str, float] | None, max_model_len: int
) -> SwapCosts:
    """The engine's SwapCosts on this machine (see the module docstring); `engine` is AsyncLLM."""
    given = dict(override or {})
    measured: dict[str, float] = {}
    if not {"swap_bytes_per_s", "swap_fixed_s"} <= set(given):
        kernel = (await engine.collective_rpc("teola_kv_swap_measure"))[0]
        measured.update(swap_bytes_per_s=kernel["swap_bytes_per_s"], swap_fixed_s=kernel["swap_fixed_s"])
    if "prefill_s_per_token" not in given:
        lengths = (
            CALIBRATION_TOKENS[0],
            max(CALIBRATION_TOKENS[0] + 1, min(CALIBRATION_TOKENS[1], max_model_len - 1)),
        )
        short, long_ = [await _prefill_seconds(engine, token_id, n) for n in lengths]
        measured["prefill_s_per_token"] = max(long_ - short, 0.0) / (lengths[1] - lengths[0])
    return SwapCosts.from_dict({**measured, **given})


async def _prefill_seconds(engine: Any, token_id: int, n: int, repeats: int = 2) -> float:
    from vllm import SamplingParams

    from engines.llm_text.llm_requests import tokens_prompt

    best = float("inf")
    for _ in range(repeats):
        prompt = tokens_prompt([token_id] * n, cache_salt=f"teola-calibrate-{uuid.uuid4().hex}")
        t0 = time.perf_counter()
        async for _ in engine.generate(
            prompt, SamplingParams(max_tokens=1, temperature=0.0), request_id=f"teola-calibrate-{next(_ids)}"
        ):
            pass
        best = min(best, time.perf_counter() - t0)
    return best


def call_params(key: str | None, costs: SwapCosts | None, on_finish: bool = False) -> dict[str, Any] | None:
    """SamplingParams.extra_args of a call that takes part in KV swap (None: it does not);
    `on_finish`: offer its KV for saving when it ends normally too (a call pausing for a tool)."""
    if key is None or costs is None:
        return None
    params: dict[str, Any] = {"key": key, "costs": costs.as_dict()}
    if on_finish:
        params["on_finish"] = True
    return {"kv_transfer_params": {"teola_swap": params}}


def forget_params(keys: list[str], running: bool) -> dict[str, Any]:
    """The kv_transfer_params of a marker request telling the connector that the calls of `keys`
    were cancelled: drop their saved KV, and (`running`) save nothing when their abort follows."""
    return {"teola_swap": {"forget": list(keys), "running": bool(running)}}


def forgotten(params: Any) -> tuple[list[str], bool] | None:
    """(keys, running) of a marker request's kv_transfer_params (`forget_params`), else None."""
    swap = params.get("teola_swap") if isinstance(params, dict) else None
    keys = swap.get("forget") if isinstance(swap, dict) else None
    if not isinstance(keys, list) or not all(isinstance(k, str) for k in keys):
        return None
    return keys, bool(swap.get("running"))


async def forget(engine: Any, keys: list[str], running: bool) -> None:
    """Send the marker of `forget_params` through vLLM's pre-aborted request (`engine`: AsyncLLM) and
    return once the connector's `request_finished` has seen it, so a call's abort sent afterwards
    finds its key cancelled and saves nothing."""
    await engine.notify_kv_transfer_request_rejected(
        f"teola-forget-{next(_ids)}", forget_params(keys, running)
    )
    # vLLM's engine core takes aborts eagerly, ahead of the requests queued before them (its
    # aborts_queue), so the marker's place in the input queue alone does not order it before the
    # abort: a utility call is answered only once the input queue reached it, past the marker
    await engine.is_sleeping()


def result_fields(output: Any) -> dict[str, int]:
    """{"kv_swap_loaded_tokens": n} for a finished call the connector reported on (n: tokens it
    loaded from host memory), else {}."""
    params = getattr(output, "kv_transfer_params", None) or {}
    swap = params.get("teola_swap") if isinstance(params, dict) else None
    return {"kv_swap_loaded_tokens": int(swap.get("loaded_tokens", 0))} if isinstance(swap, dict) else {}


async def stats(engine: Any, costs: SwapCosts | None) -> dict[str, Any]:
    """The connector's counters (scheduler counters as of the last engine step + worker totals)
    and the costs calls are sent with."""
    out = dict((await engine.collective_rpc("teola_kv_swap_stats"))[0])
    if costs is not None:
        out["costs"] = costs.as_dict()
    return out
