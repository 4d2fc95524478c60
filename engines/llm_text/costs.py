"""An LLM engine's costs as it reports them to compilation (`EngineProfile.costs`, plain data): a
request's fixed cost, one prompt token's prefill, one decode step at batch 1 and the prefix cache's
KV block size, with where they come from and how well they fit. Optimization passes gate the
requests and streams they add on these (teola.passes.*_cost).

They come from a profile named in the engine's option `costs` (a shipped profile of engines/profiles,
e.g. `cpu-smollm2-135m`, or a profile file: its `vllm` entry's `base`, `prefill_token`, `decode_seq`
and `block_size`), or are fitted at start by a short probe (engines.llm_text.cost_probe)."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PROFILE_DIR = Path(__file__).resolve().parents[1] / "profiles"  # the shipped profiles (engines.sim.profile's)


@dataclass(frozen=True, slots=True, kw_only=True)
class EngineCosts:
    """request_s: seconds one request costs beyond its tokens (scheduling, a step's fixed part, the
    network for a remote server); prefill_token_s: seconds per prompt token prefilled; decode_step_s:
    seconds per output token at batch 1; block_size: tokens per KV block (only whole blocks are
    prefix-cached); source: "fitted at start", or the profile's name; error: the fit's mean absolute
    relative error over its samples (0 for a profile); probe_s: engine seconds the probe took."""

    request_s: float
    prefill_token_s: float
    block_size: int
    source: str
    decode_step_s: float = 0.0
    error: float = 0.0
    probe_s: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> EngineCosts | None:
        """The costs an engine reported (None for {}: none known)."""
        if not data:
            return None
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})

    def describe(self) -> str:
        fit = f", fit error {self.error:.0%}" if self.source == FITTED else ""
        return (
            f"{self.source}{fit}: request {self.request_s * 1e3:.1f} ms, prefill "
            f"{self.prefill_token_s * 1e3:.2f} ms/token, decode {self.decode_step_s * 1e3:.1f} ms/step, "
            f"block {self.block_size}"
        )


FITTED = "fitted at start"


def profile_costs(profile: str) -> EngineCosts:
    """The `vllm` entry of a shipped profile (by name) or of a profile file (by path)."""
    path = Path(profile)
    if not path.is_file():
        path = PROFILE_DIR / f"{profile}.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        llm = data["engines"]["vllm"]
        cost = llm["cost"]
        table = [(float(n), float(t)) for n, t in cost.get("token_table", [])]
        base, prefill = float(cost["base"]), float(cost["prefill_token"])
        if table:  # a GPU profile: a step's seconds by the tokens it computes, beside `base`
            prefill += (_at(table, 1024) - _at(table, 1)) / 1023
        return EngineCosts(
            request_s=base,
            prefill_token_s=prefill,
            decode_step_s=base + float(cost.get("decode_seq", 0.0)) + (_at(table, 1) if table else 0.0),
            block_size=int(llm.get("block_size", 16)),
            source=str(data.get("name", profile)),
        )
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"profile {profile!r} gives no vllm costs ({type(exc).__name__}: {exc})") from None


def _at(table: list[tuple[float, float]], n: float) -> float:
    """A token table's seconds at n tokens, linear between its points (its ends beyond them)."""
    for (n0, t0), (n1, t1) in zip(table, table[1:]):
        if n <= n1:
            return t0 if n <= n0 else t0 + (t1 - t0) * (n - n0) / (n1 - n0)
    return table[-1][1]


def check_costs_option(name: str, costs: Any) -> bool | str:
    """An LLM adapter's option `costs`: True (fit them at start), False (report none) or a profile
    (its name or file), read now so a wrong name fails at once."""
    if isinstance(costs, bool):
        return costs
    if isinstance(costs, str) and costs:
        try:
            profile_costs(costs)
        except ValueError as exc:
            raise ValueError(
                f"engine {name!r}: option costs: {exc}; give true (fit at start), false or a "
                f"profile of {PROFILE_DIR}"
            ) from None
        return costs
    raise ValueError(f"engine {name!r}: option costs must be true, false or a profile name, got {costs!r}")
