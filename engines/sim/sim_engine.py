"""A deterministic engine: every op of engines/protocol.py with results that are a pure function of
the requests, and latency from a batch-size profile (the engine of the runtime benchmarks, the unit
tests and, later, the simulator). Batches on one SimEngine run one at a time (like one GPU) unless
`serial=False`. Not a model: its answers are reproducible placeholders, never meant as real output."""

from __future__ import annotations

import asyncio
import functools
import math
import re
import zlib
from collections.abc import AsyncIterator
from typing import Any

from engines.protocol import EngineProfile, StreamEvent
from engines.requests import DECODE_OPS, PREFILL_OPS, PrimOp
from engines.sim.device import DeviceShare, computing
from engines.sim.text import count_tokens, memo_caches
from engines.stream_events import Delta, Item

DIM = 32
_WORD = re.compile(r"[a-z0-9]+")


def words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def crc(text: str) -> int:
    return zlib.crc32(text.encode())


def embed(text: str, dim: int = DIM) -> list[float]:
    return list(_embed(text, dim))


@functools.lru_cache(maxsize=1 << 14)  # simulations re-embed the same chunks; a pure function of the text
def _embed(text: str, dim: int = DIM) -> tuple[float, ...]:
    v = [0.0] * dim
    for w in words(text):
        h = crc(w)
        v[h % dim] += 1.0 if (h >> 8) & 1 else -1.0
    n = math.sqrt(sum(x * x for x in v)) or 1.0
    return tuple(x / n for x in v)


@functools.lru_cache(maxsize=1 << 14)
def word_set(text: str) -> frozenset[str]:
    return frozenset(words(text))


def clear_memos() -> None:
    """Empty the simulated engines' memo caches (bounded, keyed by text; not per-query state)."""
    for cache in (_embed, word_set, *memo_caches()):
        cache.cache_clear()


def linear_cost(cost: dict[str, float], tokens: list[int]) -> float:
    """Seconds of one batch whose requests have these token counts under an op's linear model:
    base + per_item * items + per_token * all tokens + per_padded_token * items * the longest
    request's tokens (a transformer batch is padded to its longest text, so a batch of unequal
    texts costs more than its token sum says)."""
    n = len(tokens)
    return (
        cost.get("base", 0.0)
        + cost.get("per_item", 0.0) * n
        + cost.get("per_token", 0.0) * sum(tokens)
        + cost.get("per_padded_token", 0.0) * n * max(tokens, default=0)
    )


def interpolate(profile: dict[int, float], n: int) -> float:
    """Seconds for a batch of n from {batch size: seconds} samples (linear between samples,
    proportional beyond the largest)."""
    if not profile or n <= 0:
        return 0.0
    pts = sorted(profile.items())
    if n <= pts[0][0]:
        return pts[0][1]
    for (a, la), (b, lb) in zip(pts, pts[1:]):
        if n <= b:
            return la + (lb - la) * (n - a) / (b - a)
    b, lb = pts[-1]
    return lb * n / b


class SimEngine:
    """A deterministic engine for tests and benchmarks.

    latency: {batch size: seconds} for `execute`; op_latency: per-op profiles overriding it;
    token_latency: extra seconds per output token of a decode (the whole batch decodes together);
    n_items: items a `split` decode produces; fail_on: a marker: any request containing it fails
    its batch; corpus: documents for text search ({"query"} requests); record: keep every request
    and batch (in `requests` / `batches`) and a prefix cache; off for long runs. op_cost: per-op
    linear models {"base": s, "per_item": s, "per_token": s, "per_padded_token": s} over the batch's
    requests and the words and punctuation marks of their texts, summed and padded to the longest
    (`linear_cost`; added to the curves; what `teola profile` fits).
    dim: length of the embedding vectors (default 32). device: its share of a machine other
    simulated engines also use (engines/sim/device.py; applies to `execute`)."""

    def __init__(
        self,
        name: str,
        ops: frozenset[str] | list[str] | None = None,
        *,
        latency: dict[int, float] | None = None,
        op_latency: dict[str, dict[int, float]] | None = None,
        token_latency: float = 0.0,
        n_items: int = 3,
        fail_on: str | None = None,
        corpus: list[str] | None = None,
        serial: bool = True,
        max_batch: int = 64,
        max_efficient_batch: int = 16,
        token_budget: int = 0,
        record: bool = True,
        op_cost: dict[str, dict[str, float]] | None = None,
        dim: int = DIM,
        device: DeviceShare | None = None,
    ) -> None:
        self.name = name
        self.dim = dim
        self.device = device
        self.ops = frozenset(ops or ())
        self.latency = dict(latency or {})
        self.op_latency = dict(op_latency or {})
        self.token_latency = token_latency
        self.op_cost = {op: dict(c) for op, c in (op_cost or {}).items()}
        self.n_items = n_items
        self.fail_on = fail_on
        self.corpus = list(corpus or [])
        self.profile = EngineProfile(max_batch, max_efficient_batch, token_budget, self.latency)
        self.store: dict[str, list[tuple[str, list[float], dict]]] = {}
        self.dropped: list[str] = []
        self.batches: list[dict[str, Any]] = []
        self.requests: list[dict[str, Any]] = []
        self._prefixes: set[int] = set()
        self._lock = asyncio.Lock() if serial else None
        self.record = record
        self.started = False
        self.aborted: list[str] = []  # owners whose running requests abort() was asked to stop
        self._active: dict[str, int] = {}  # owner -> requests executing now
        self.running = 0  # batches executing now
        self.busy_s = 0.0  # seconds of batches executed (what a simulation reports as utilisation)
        self.mid_stream = 0  # streaming batches that have sent an item and not yet finished

    # ---- EngineBackend ----------------------------------------------------------------------------
    async def start(self) -> None:
        self.started = True

    async def stop(self) -> None:
        self.started = False

    async def health(self) -> bool:
        return self.started

    def busy(self) -> int:
        """Batches executing on this engine right now (a test can wait until one is)."""
        return self.running

    def streaming(self) -> int:
        """Streaming batches that have already sent an item and are still running."""
        return self.mid_stream

    async def execute(self, op: str, requests: list[dict[str, Any]]) -> list[Any]:
        if self._lock is None:
            return await self._execute(op, requests)
        async with self._lock:
            return await self._execute(op, requests)

    async def _execute(self, op: str, requests: list[dict[str, Any]]) -> list[Any]:
        t0 = asyncio.get_running_loop().time()
        self._check(op, requests)
        delay = self._delay(op, requests)
        async with computing(self.device) as slowdown:
            delay *= slowdown
            self.busy_s += delay
            if delay > 0:
                self.running += 1
                owners = [r["owner"] for r in requests if r.get("owner")]
                for o in owners:
                    self._active[o] = self._active.get(o, 0) + 1
                try:
                    await asyncio.sleep(delay)
                finally:
                    self.running -= 1
                    for o in owners:
                        self._active[o] -= 1
        out = [self._one(op, r) for r in requests]
        if self.record:
            self.batches.append(
                {"op": op, "size": len(requests), "start": t0, "end": asyncio.get_running_loop().time()}
            )
        return out

    async def stream(
        self, op: str, requests: list[dict[str, Any]]
    ) -> AsyncIterator[tuple[int, StreamEvent, Any]]:
        if self._lock is not None:
            await self._lock.acquire()
        counted = sent = False
        try:
            t0 = asyncio.get_running_loop().time()
            self._check(op, requests)
            finals = [self._decode(r) for r in requests]
            total = self._delay(op, requests)
            self.busy_s += total
            steps = max((len(f["items"]) for f in finals), default=0)
            step = total / (steps + 1) if steps else total
            owners = [r["owner"] for r in requests if r.get("owner")]
            self.running += 1
            self._own(owners, 1)  # a streaming request is executing too: an abort counts it
            counted = True
            for k in range(steps):
                if step > 0:
                    await asyncio.sleep(step)
                for i, f in enumerate(finals):
                    if k < len(f["items"]):
                        if not sent:
                            sent = True
                            self.mid_stream += 1
                        yield i, StreamEvent.ITEM, Item(text=f["items"][k])
            if step > 0:
                await asyncio.sleep(step)
            self.running -= 1
            self._own(owners, -1)
            counted = False
            if self.record:
                self.batches.append(
                    {
                        "op": op,
                        "size": len(requests),
                        "start": t0,
                        "end": asyncio.get_running_loop().time(),
                        "stream": True,
                    }
                )
            for i, f in enumerate(finals):
                if requests[i].get("stream_text"):
                    for piece in re.findall(r"\S+\s*", f["text"]):
                        yield i, StreamEvent.DELTA, Delta(text=piece)
                yield i, StreamEvent.FINAL, f
        finally:
            if counted:
                self.running -= 1
                self._own(owners, -1)
            if sent:
                self.mid_stream -= 1
            if self._lock is not None:
                self._lock.release()

    def _own(self, owners: list[str], delta: int) -> None:
        for o in owners:
            self._active[o] = self._active.get(o, 0) + delta

    async def abort(self, owners: list[str]) -> int:
        """Record the abort; returns how many of these owners' requests are executing (they finish anyway)."""
        self.aborted.extend(owners)
        return sum(self._active.get(o, 0) for o in owners)

    def drop_namespace(self, namespace: str) -> None:
        self.store.pop(namespace, None)
        self.dropped.append(namespace)

    # ---- semantics ----------------------------------------------------------------------------------
    def _check(self, op: str, requests: list[dict[str, Any]]) -> None:
        if self.ops and op not in self.ops:
            raise ValueError(f"sim engine {self.name!r} does not run {op!r}")
        if self.record:
            self.requests.extend(requests)
        if self.fail_on is not None:
            for r in requests:
                if self.fail_on in repr(r):
                    raise RuntimeError(
                        f"sim engine {self.name!r}: injected failure ({self.fail_on!r} in a request)"
                    )

    def _delay(self, op: str, requests: list[dict[str, Any]]) -> float:
        d = interpolate(self.op_latency.get(op, self.latency), len(requests))
        if op in DECODE_OPS and self.token_latency:
            d += self.token_latency * max(int(r.get("max_tokens") or 0) for r in requests)
        cost = self.op_cost.get(op)
        if cost:
            d += linear_cost(
                cost,
                [
                    count_tokens(str(r.get("text", ""))) + count_tokens(str(r.get("query", "")))
                    for r in requests
                ],
            )
        return d

    def _one(self, op: str, r: dict[str, Any]) -> Any:
        if op == PrimOp.EMBEDDING:
            return embed(r["text"], self.dim)
        if op == PrimOp.INGESTION:
            self.store.setdefault(r["namespace"], []).append((r["text"], r["embedding"], r["meta"]))
            return None
        if op == PrimOp.SEARCHING:
            if "query" in r:
                q = word_set(r["query"])
                scored = [(len(q & word_set(d)), d) for d in self.corpus]
            else:
                e = r["embedding"]
                scored = [
                    (sum(a * b for a, b in zip(e, v)), t) for t, v, _ in self.store.get(r["namespace"], [])
                ]
            scored.sort(key=lambda x: (-x[0], x[1]))
            return [{"text": t, "score": float(s)} for s, t in scored[: r["top_k"]]]
        if op == PrimOp.RERANKING:
            return len(word_set(r["query"]) & word_set(r["text"])) + (crc(r["text"]) % 1000) / 1e4
        if op in PREFILL_OPS:
            return self._prefill(r)
        if op in DECODE_OPS:
            return self._decode(r)
        if op == PrimOp.TOOL:
            return {"tool": r["tool"], "result": f"{r['tool']}({sorted(r['args'].items())})"}
        raise ValueError(f"sim engine {self.name!r}: unknown op {op!r}")

    def _prefill(self, r: dict[str, Any]) -> dict[str, Any]:
        toks = words(" ".join(t for _, t in r["parts"]))
        cached = 0
        h = 0
        for i in range(16, len(toks) + 1, 16):  # full 16-token blocks, like vLLM's prefix cache
            h = crc(f"{h}:{' '.join(toks[i - 16 : i])}")
            if h in self._prefixes:
                cached = i
            if self.record:
                self._prefixes.add(h)
        return {"num_prompt_tokens": len(toks), "num_cached_tokens": cached}

    def _decode(self, r: dict[str, Any]) -> dict[str, Any]:
        info = self._prefill(r)
        prompt = "\n".join(f"{n}: {t}" for n, t in r["parts"])
        tag = f"{crc(prompt):08x}"
        if r.get("split"):
            q = " ".join(words(dict(r["parts"]).get("question", ""))[:6])
            items = [f"{q} aspect {i} {tag[:4]}" for i in range(self.n_items)]
            text = "\n".join(f"{i + 1}. {it}" for i, it in enumerate(items))
        else:
            items = []
            text = f"answer {tag}"
        n_out = len(words(text))
        # like vLLM: "length" when the budget ended the decode (ignore_eos decodes all of it)
        reason = "length" if r.get("ignore_eos") or n_out >= int(r.get("max_tokens") or n_out + 1) else "stop"
        return {"text": text, "items": items, "num_output_tokens": n_out, "finish_reason": reason, **info}


def sim_engines(latency: float = 0.0, record: bool = True, **llm_kw: Any) -> dict[str, SimEngine]:
    """The four engines of the RAG apps with a flat latency (seconds per batch)."""
    flat = {1: latency} if latency else {}
    return {
        "llm": SimEngine("llm", latency=flat, record=record, **llm_kw),
        "embedding": SimEngine("embedding", latency=flat, record=record),
        "vectordb": SimEngine("vectordb", latency=flat, record=record),
        "reranker": SimEngine("reranker", latency=flat, record=record),
    }
