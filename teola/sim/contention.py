"""`teola profile`'s last phase: how much the app's engines slow each other on a shared machine.

Each engine's cost model is fitted with that engine alone. On a CPU machine teola's LLM and its
sentence-transformers engines run at once on different cores of one chip (engines/tuning/settings.py)
and still slow each other: shared cache and memory bandwidth, and the serving process's core, which
handles vLLM's outputs, busy with an embedding batch. For the LLM and each other compute engine
this phase times, back to back and alternating:
- a synthesis-like LLM call (a few hundred prompt tokens, 24 decoded) alone, and while the other
  engine computes batch after batch;
- four batches of the other engine in a row (about one LLM call's length on a CPU) alone, and while
  the LLM runs such calls one after another.
The median over pairs of loaded / alone (at least 1) is the profile's "device" slowdown of that pair
(engines/sim/device.py); the engines that compute one batch at a time between them (`exclusive`)
are listed as they are configured.
"""

from __future__ import annotations

import asyncio
import statistics
from collections.abc import Awaitable, Callable
from typing import Any

from engines.requests import PrimOp

Say = Callable[[str], None]
# engine kinds whose batches compete with the LLM for the machine, and a batch of each to time
_OTHER_OPS = {"sentence_transformers": "embedding", "reranker": "reranking"}


async def profile_contention(
    handles: dict[str, Any], prose: Callable[[int, int], str], say: Say, repeats: int = 5
) -> dict[str, Any] | None:
    """handles: {engine kind: a started engine}. Returns the profile's "device" entry, or None
    when there is no LLM or no other compute engine to pair it with."""
    llm = handles.get("vllm")
    others = {k: h for k, h in handles.items() if k in _OTHER_OPS}
    if llm is None or not others:
        return None
    if not isinstance(repeats, int) or isinstance(repeats, bool) or repeats < 1:
        raise ValueError(f"repeats must be an int >= 1, got {repeats!r}")
    slowdown: dict[str, dict[str, float]] = {"vllm": {}}
    fit: dict[str, Any] = {}
    salt = iter(range(50_000, 10**9))

    def call() -> list[dict[str, Any]]:
        # a synthesis-like call: a few hundred prompt tokens (prefill) and a short answer (decode)
        return [{"parts": [["question", prose(300, next(salt))]], "max_tokens": 24, "ignore_eos": True}]

    async def llm_call() -> float:
        return await _timed(llm.execute("decoding", call()))

    async def llm_load(stop: asyncio.Event) -> None:
        while not stop.is_set():
            await llm.execute("decoding", call())

    for kind, handle in others.items():
        op = _OTHER_OPS[kind]
        query = prose(12, next(salt))

        def batch() -> list[dict[str, Any]]:
            texts = [prose(220, next(salt)) for _ in range(8)]
            return [{"text": t} if op == PrimOp.EMBEDDING else {"query": query, "text": t} for t in texts]

        async def other_batch() -> float:
            return await _timed(handle.execute(op, batch()))

        async def other_batches() -> float:
            # several batches in a row span a whole LLM call (its prefill and its decode), whose
            # phases slow a batch by different amounts
            return await _timed(_in_turn(handle, op, batch, 4))

        async def other_load(stop: asyncio.Event) -> None:
            while not stop.is_set():
                await handle.execute(op, batch())

        await other_batch()  # warm-up
        llm_pairs = await _paired(llm_call, other_load, repeats)
        other_pairs = await _paired(other_batches, llm_load, repeats)
        slowdown["vllm"][kind] = _factor(llm_pairs)
        slowdown[kind] = {"vllm": _factor(other_pairs)}
        fit[f"vllm|{kind}"] = {"call_s": llm_pairs, "factor": slowdown["vllm"][kind]}
        fit[f"{kind}|vllm"] = {"batch_s": other_pairs, "factor": slowdown[kind]["vllm"]}
        say(
            f"contention: an LLM call x{slowdown['vllm'][kind]:.2f} while {kind} computes; "
            f"a {kind} batch x{slowdown[kind]['vllm']:.2f} while the LLM runs calls"
        )
    exclusive = sorted(k for k, h in others.items() if getattr(h, "exclusive", False))
    return {"exclusive": exclusive, "slowdown": {k: v for k, v in slowdown.items() if v}, "fit": fit}


async def _in_turn(handle: Any, op: str, batch: Callable[[], list[dict[str, Any]]], n: int) -> None:
    for _ in range(n):
        await handle.execute(op, batch())


async def _timed(coro: Awaitable[Any]) -> float:
    clock = asyncio.get_running_loop().time
    t = clock()
    await coro
    return clock() - t


def _factor(pairs: list[tuple[float, float]]) -> float:
    """The median over pairs of (time under load / time alone), at least 1."""
    return round(max(1.0, statistics.median(b / a for a, b in pairs)), 3) if pairs else 1.0


async def _paired(
    measure: Callable[[], Awaitable[float]], load: Callable[[asyncio.Event], Awaitable[None]], repeats: int
) -> list[tuple[float, float]]:
    """(alone, loaded) seconds of `measure`, `repeats` times: once alone, then once while `load`
    runs batch after batch in the background. The load is stopped between batches, not cancelled
    mid-batch: a cancelled engine call may keep computing and overlap the next "alone" measure."""
    pairs: list[tuple[float, float]] = []
    for _ in range(repeats):
        alone = await measure()
        stop = asyncio.Event()
        task = asyncio.ensure_future(load(stop))
        try:
            await asyncio.sleep(0.2)  # let the load's first batch start
            loaded = await measure()
        finally:
            stop.set()
            await task
        pairs.append((round(alone, 5), round(loaded, 5)))
    return pairs
