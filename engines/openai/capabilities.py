"""What a remote LLM server can do, probed once when its adapter starts, each with one log line and a
fallback, so any OpenAI-compatible server works and vLLM's extras are used when present:

- vllm_fields: it takes vLLM's sampling fields (top_k, min_p, repetition_penalty, ignore_eos,
  skip_special_tokens, cache_salt) in the request body; else only OpenAI's fields are sent.
- token_ids: it returns the ids of the generated tokens (vLLM's `return_token_ids`); else output
  tokens are counted from `usage.completion_tokens` and their ids re-tokenized from the text locally.
- priority: it honours request priorities (vLLM run with `--scheduling-policy priority`): read from
  vLLM's `/server_info` when it is served, else probed (some vLLM versions reject a nonzero priority
  without it, others ignore it); else none is sent and teola's own queue order still applies.
- cached_tokens: it reports `usage.prompt_tokens_details.cached_tokens` (vLLM run with
  `--enable-prompt-tokens-details`); else cached-token counts are 0.
- health_route: `/health` when it answers 200 there, else `/v1/models`.
- max_num_seqs and token_budget: vLLM's batch size (from `/server_info`, served with
  VLLM_SERVER_DEV_MODE=1) and KV-cache tokens (blocks x block size, from `/metrics`); None / 0 when
  the server does not tell.
- block_size: tokens per KV block (from `/metrics`; vLLM's GPU default, 16, when not reported): the
  unit its prefix cache keeps.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import Any

from engines.openai.client import RemoteClient

log = logging.getLogger("teola.engines")

# vLLM's neutral values, sent explicitly so a server's defaults (`--generation-config auto` reads the
# model's generation_config.json) cannot change what the in-process adapter would sample
VLLM_NEUTRAL = {"top_k": 0, "min_p": 0.0, "repetition_penalty": 1.0, "skip_special_tokens": True}
DEFAULT_BLOCK_SIZE = 16  # vLLM's default on GPU
_CACHE_INFO = re.compile(r"^vllm:cache_config_info\{(?P<labels>[^}]*)\}", re.MULTILINE)


@dataclass(slots=True)
class Capabilities:
    """What one server takes and returns (see the module docstring)."""

    vllm_fields: bool = False
    token_ids: bool = False
    priority: bool = False
    cached_tokens: bool = False
    health_route: str = "/v1/models"
    max_num_seqs: int | None = None
    token_budget: int = 0
    block_size: int = DEFAULT_BLOCK_SIZE


async def probe(client: RemoteClient, model: str, prompt: list[int]) -> Capabilities:
    """Probe the server behind `client` with one-token completions of `prompt` (a few short
    requests); logs one line per capability."""
    import openai

    caps = Capabilities()
    where = f"engine {client.name!r} ({client.base_url})"
    base = {"model": model, "prompt": prompt, "max_tokens": 1, "temperature": 0.0}
    try:
        answer = await client.api.completions.create(
            **base, extra_body={**VLLM_NEUTRAL, "return_token_ids": True, "cache_salt": "teola-probe"}
        )
        caps.vllm_fields = True
    except openai.BadRequestError:
        answer = await _plain(client, base)
    except openai.APIError as exc:
        raise client.error("completions", exc) from exc
    extras = answer.choices[0].model_extra or {} if answer.choices else {}
    caps.token_ids = isinstance(extras.get("token_ids"), list)
    details = answer.usage.prompt_tokens_details if answer.usage is not None else None
    caps.cached_tokens = details is not None and details.cached_tokens is not None
    config = await _server_config(client)
    if config is not None:
        caps.priority = config.get("scheduler_config", {}).get("policy") == "priority"
    elif caps.vllm_fields:
        try:
            await client.api.completions.create(**base, extra_body={"priority": 1})
            caps.priority = True
        except openai.BadRequestError:
            caps.priority = False
        except openai.APIError as exc:
            raise client.error("completions", exc) from exc
    health = await client.get("/health")
    caps.health_route = "/health" if health is not None and health.status_code == 200 else "/v1/models"
    caps.max_num_seqs = _max_num_seqs(config)
    caps.token_budget, caps.block_size = await _cache_info(client)
    _log(where, caps)
    return caps


async def _plain(client: RemoteClient, base: dict[str, Any]) -> Any:
    import openai

    try:
        return await client.api.completions.create(**base)
    except openai.APIError as exc:
        raise client.error("completions", exc) from exc


async def _server_config(client: RemoteClient) -> dict[str, Any] | None:
    """vLLM's config from `/server_info` (served with VLLM_SERVER_DEV_MODE=1); None without it."""
    answer = await client.get("/server_info?config_format=json")
    if answer is None or answer.status_code != 200:
        return None
    try:
        config = answer.json()["vllm_config"]
    except (ValueError, KeyError, TypeError):
        return None
    return config if isinstance(config, dict) else None


def _max_num_seqs(config: dict[str, Any] | None) -> int | None:
    value = (config or {}).get("scheduler_config", {}).get("max_num_seqs")
    return value if isinstance(value, int) and value > 0 else None


async def _cache_info(client: RemoteClient) -> tuple[int, int]:
    """(KV-cache tokens, block size) from vLLM's cache_config_info metric; (0, default) without it."""
    answer = await client.get("/metrics")
    match = _CACHE_INFO.search(answer.text) if answer is not None and answer.status_code == 200 else None
    if match is None:
        return 0, DEFAULT_BLOCK_SIZE
    labels = dict(re.findall(r'(\w+)="([^"]*)"', match["labels"]))
    try:
        block = int(labels["block_size"])
    except (KeyError, ValueError):
        return 0, DEFAULT_BLOCK_SIZE
    try:
        return int(labels["num_gpu_blocks"]) * block, block
    except (KeyError, ValueError):
        return 0, block


def _log(where: str, caps: Capabilities) -> None:
    log.info(
        "%s: vLLM sampling fields %s",
        where,
        "accepted"
        if caps.vllm_fields
        else "rejected: only OpenAI's fields are sent (top_k, min_p, repetition_penalty, ignore_eos and "
        "cache_salt are dropped; tenants' salted prompts: engine option unsalted)",
    )
    log.info(
        "%s: output token ids %s",
        where,
        "returned"
        if caps.token_ids
        else "not returned: output tokens are counted from usage and their ids re-tokenized locally",
    )
    log.info(
        "%s: priority scheduling %s",
        where,
        "on: teola's priorities are sent"
        if caps.priority
        else "off (start vLLM with --scheduling-policy priority): no priorities are sent; teola's own "
        "queue order still applies",
    )
    log.info(
        "%s: cached-token counts %s",
        where,
        "reported"
        if caps.cached_tokens
        else "not reported (start vLLM with --enable-prompt-tokens-details): counted as 0",
    )
    log.info("%s: health route %s", where, caps.health_route)
    log.info(
        "%s: max_num_seqs %s, KV-cache tokens %s",
        where,
        caps.max_num_seqs if caps.max_num_seqs else "not reported (engine option max_num_seqs applies)",
        caps.token_budget or "not reported (no token budget)",
    )
