"""The engine boundary: what the runtime asks of every engine adapter.

Requests and results are plain serializable data (dicts, lists, str, float, numpy arrays), so an
adapter runs the same in-process or as a Ray actor. Ops are the string values of `PrimOp`; each op's
request is a TypedDict in engines/requests.py, with every optional field's one default there.

Request / result shapes per op (one request per item; the runtime batches requests across queries):

- "embedding":   {"text": str}                                  -> list[float] (L2-normalized)
- "ingestion":   {"namespace": str, "text": str, "embedding": list[float], "meta": dict}
                                                                -> None
- "searching":   vector store: {"namespace": str, "embedding": list[float], "top_k": int}
                 text search engine: {"query": str, "top_k": int}
                                                                -> list[{"text": str, "score": float}]
- "reranking":   {"query": str, "text": str}                    -> float (higher = more relevant)
- LLM ops ("prefilling", "partial_prefilling", "full_prefilling", "decoding", "partial_decoding"):
                 {"parts": [[name, text], ...],   # prompt parts in prompt order
                  "complete": bool,               # False: a prefix only (partial prefilling)
                  "max_tokens": int, "temperature": float, "stop": list[str] | None,
                  "priority": int,                # lower runs first
                  "split": "list" | "jsonl" | None,  # how to cut a streamed output into items
                  "max_items": int,               # optional, with a split: stop once this many items are out
                  "ignore_eos": bool,             # optional (default False): decode exactly max_tokens
                                                  # tokens (fixed output lengths for benchmarks)
                  "seed": int | None,             # optional: sampling seed
                  "json_object": bool,            # optional (Feature.STRUCTURED_OUTPUTS): one JSON object
                  "json_schema": dict | None,     # optional (Feature.STRUCTURED_OUTPUTS): JSON matching it
                  "logprobs": int | None,         # optional (Feature.LOGPROBS): per output token its
                                                  # logprob and this many top alternatives
                  "owner": str, "tag": str,       # optional: keys abort() can name (query / request)
                  "stream_text": bool,            # optional: stream (DELTA, Delta) as it decodes
                  "progress": bool,               # optional: stream (PROGRESS, Progress: tokens decoded
                                                  # so far) and (KV, KVReport) where the engine reports it
                  "resume_ids": list[int],        # optional, decodes: token ids decoded before a
                                                  # preemption; the prompt continues with them
                  "kv_swap_key": str}             # optional, decodes: names the call's KV across
                                                  # its resumes (vLLM with kv_swap saves it on abort)
   prefills -> {"num_prompt_tokens": int, "num_cached_tokens": int}
   decodes  -> {"text": str, "items": list[str], "num_prompt_tokens": int,
                "num_cached_tokens": int, "num_output_tokens": int,
                "output_token_ids": list[int],    # optional (vLLM): for resuming a preempted call
                "finish_reason": str,             # optional: "stop" | "length" | "abort" (vLLM's)
                "logprobs": [{"token", "logprob", "bytes", "top_logprobs": [{"token", "logprob",
                              "bytes"}]}],        # with "logprobs" asked for: one per output token
                "aborted": True,                  # only when abort() stopped it early
                "kv_swap_loaded_tokens": int}     # optional (vLLM with kv_swap): KV swapped in
   both may carry "queued_s" and "executor_s" (floats, where the engine can tell): seconds in the
   engine's own queue before the first scheduling, and in its running batch (vLLM and the simulated
   engine; a program policy charges the latter as service)
- "tool":        {"tool": str, "args": dict}                     -> Any JSON-serializable
"""

from __future__ import annotations

import enum
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from engines.stream_events import KVReport as KVReport  # re-exported: the payload of a StreamEvent.KV


class Feature(str, enum.Enum):
    """What an LLM engine can do beyond the requests every LLM engine takes, declared once in its
    profile (`EngineProfile.features`) so callers refuse a request it cannot honour instead of
    probing it."""

    STRUCTURED_OUTPUTS = "structured outputs"  # "json_object" / "json_schema": constrained decoding
    LOGPROBS = "logprobs"  # "logprobs": log-probabilities of the output tokens

    def __str__(self) -> str:
        return self.value


class StreamEvent(enum.StrEnum):
    """The kind of one event an engine's `stream` yields, as (request index, kind, payload); each
    kind's payload type is in engines/stream_events.py."""

    ITEM = "item"  # a complete item of a splittable output (Item: its text)
    DELTA = "delta"  # decoded text, for requests with "stream_text" (Delta)
    PROGRESS = "progress"  # tokens decoded so far, for requests with "progress" (Progress)
    KV = "kv"  # what the engine itself counts for a request with "progress" (KVReport)
    FINAL = "final"  # the request's result, its last event (what execute returns for it)


class Capability(enum.StrEnum):
    """An optional method of an engine adapter beyond `EngineBackend`'s; the value is the method's
    name. An adapter may declare what it offers as `capabilities` (an iterable of these); otherwise
    its methods say. The executor reads them once, when it starts an instance (`capabilities_of`),
    and the runtime checks `Instance.capabilities` instead of probing the adapter."""

    STREAM = "stream"  # stream(op, requests): events as it runs (StreamEvent)
    ABORT = "abort"  # abort(owners) -> int: stop running requests early
    CANCEL = "cancel"  # cancel(owners, kv_keys) -> int: abort, saving no KV
    FORGET_KV = "forget_kv"  # forget_kv(kv_keys): drop KV saved for calls that end
    HEALTH = "health"  # health() -> bool
    RERANK = "rerank"  # rerank(keys, priority) -> int: re-rank queued/running requests
    DROP_NAMESPACE = "drop_namespace"  # drop_namespace(namespace): a vector store's
    PUBLISH_NAMESPACE = "publish_namespace"  # publish_namespace(staging, namespace, rows)


def capabilities_of(backend: Any) -> frozenset[Capability]:
    """What `backend` offers: its declared `capabilities`, each checked against its methods (a
    TypeError names one it declares but lacks), or, with none declared, the methods it has."""
    found = frozenset(c for c in Capability if callable(getattr(backend, c.value, None)))
    declared = getattr(backend, "capabilities", None)
    if declared is None:
        return found
    try:
        caps = frozenset(Capability(c) for c in declared)
    except ValueError as exc:
        raise TypeError(
            f"engine adapter {backend!r}: capabilities must be engines.protocol.Capability "
            f"values ({[c.value for c in Capability]}): {exc}"
        ) from None
    if caps - found:
        raise TypeError(
            f"engine adapter {backend!r} declares capabilities {sorted(caps - found)} "
            "without the methods of those names"
        )
    return caps


@dataclass(slots=True)
class EngineProfile:
    """What schedulers need to know about an engine.

    max_batch: the most requests one `execute` call takes.
    max_efficient_batch: beyond this, bigger batches stop paying off (stage decomposition splits here).
    token_budget: for LLM engines, the prompt+output tokens an instance may hold at once, over all
    the batches it runs (its KV cache; 0 = unlimited).
    latency: seconds for a batch of n, as {n: seconds} samples (optional; used by simulation/bounds).
    context_window: for LLM engines, the most prompt+output tokens one request may hold (0 = unknown);
    synthesis packs retrieved chunks into prompts of this size.
    max_inflight: batches one instance runs at once unless the runtime is told otherwise (0 = the
    runtime's default for the kind). Adapters of remote services whose latency is the network's, not
    a shared device's, take many: a batch of calls lasts as long as its slowest call, and a new batch
    should not wait for that tail.
    features: what an LLM engine honours beyond the common request fields (`Feature`).
    costs: for LLM engines, what a request, a prompt token's prefill and a decode step cost and the
    KV block size, from a named profile or fitted at start (engines.llm_text.costs.EngineCosts as a
    dict; {} = unknown); passes gate the requests and streams they add on them.
    op_costs: for other engines, each op's seconds per request and per item, from a named profile or
    fitted at start (op name -> engines.machine.op_costs.OpCost as a dict; {} = unknown).
    """

    max_batch: int = 64
    max_efficient_batch: int = 16
    token_budget: int = 0
    latency: dict[int, float] = field(default_factory=dict)
    context_window: int = 0
    max_inflight: int = 0
    features: frozenset[Feature] = frozenset()
    costs: dict[str, Any] = field(default_factory=dict)
    op_costs: dict[str, dict[str, Any]] = field(default_factory=dict)


@runtime_checkable
class EngineBackend(Protocol):
    """One engine instance. `execute` runs one batch of same-op requests and returns one result
    per request, in order; a failure raises and fails the whole batch."""

    name: str
    ops: frozenset[str]
    profile: EngineProfile

    async def start(self) -> None: ...

    async def execute(self, op: str, requests: list[dict[str, Any]]) -> list[Any]: ...

    def stream(self, op: str, requests: list[dict[str, Any]]) -> AsyncIterator[tuple[int, StreamEvent, Any]]:
        """Streaming decode: yields (request index, StreamEvent.ITEM, text) for each complete item of a
        splittable output as soon as it is parsed, then (request index, StreamEvent.FINAL, result)."""
        ...

    async def health(self) -> bool: ...

    async def stop(self) -> None: ...

    # Optional methods are `Capability` members: e.g. `abort(owners) -> int` stops the running
    # requests whose "owner" field (the query or program id the engine scheduler sets on LLM
    # requests) is in `owners`, so a cancelled query stops costing engine time; the aborted
    # requests still return a result (marked "aborted").


def profile_with(
    default: EngineProfile, max_batch: int | None = None, max_efficient_batch: int | None = None
) -> EngineProfile:
    """An adapter's profile: its kind's `default` with the options a user gave (positive ints;
    max_efficient_batch is capped at max_batch). Raises ValueError naming a bad option."""
    for field_name, value in (("max_batch", max_batch), ("max_efficient_batch", max_efficient_batch)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise ValueError(f"option {field_name} must be a positive int or omitted, got {value!r}")
    mb = max_batch or default.max_batch
    return EngineProfile(
        max_batch=mb,
        max_efficient_batch=min(max_efficient_batch or default.max_efficient_batch, mb),
        token_budget=default.token_budget,
        context_window=default.context_window,
        max_inflight=default.max_inflight,
        features=default.features,
    )


async def restart_adapter(backend: Any) -> None:
    """Stop an adapter and start it again in place (after its engine died). A dead engine may fail
    to stop cleanly: that failure is logged and the start goes ahead."""
    try:
        await backend.stop()
    except Exception as exc:
        logging.getLogger("teola.engines").warning(
            "engine %s: stopping it before a restart failed: %s: %s",
            getattr(backend, "name", backend),
            type(exc).__name__,
            exc,
        )
    await backend.start()
