"""`teola profile`'s last phase: how much the app's engines slow each other on a shared machine.

Each engine's cost model is fitted with that engine alone. On a CPU machine teola's LLM and its
sentence-transformers engines run at once on different cores of one chip (engines/engine_settings.py)
and still slow each other: shared cache and memory bandwidth, and the serving process's core, which
handles vLLM's outputs, busy with an embedding batch. For the LLM and each other compute engine
this phase times, back to back and alternating:
- the LLM's decode iteration (a streamed batch, read as in teola.sim.fit.steady_steps) alone, and
  while the other engine computes batch after batch;
- a batch of the other engine alone, and while the LLM decodes batch after batch.
The ratio of the medians (at least 1) is the profile's "device" slowdown of that pair
(engines/sim_device.py); the engines that compute one batch at a time between them (`exclusive`)
are listed as they are configured.
"""
from __future__ import annotations

import asyncio
import statistics
from typing import Any, Awaitable, Callable

from teola.sim.fit import steady_steps

Say = Callable[[str], None]
# engine kinds whose batches compete with the LLM for the machine, and a batch of each to time
_OTHER_OPS = {"sentence_transformers": "embedding", "reranker": "reranking"}


async def profile_contention(handles: dict[str, Any], prose: Callable[[int, int], str], say: Say,
                             repeats: int = 3) -> dict[str, Any] | None:
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

    def decode_batch(out: int) -> list[dict[str, Any]]:
        return [{"parts": [["question", prose(30, next(salt))]], "max_tokens": out, "ignore_eos": True}
                for _ in range(2)]

    async def llm_step() -> float | None:
        return await _decode_step(llm, decode_batch(40))

    async def llm_load(stop: asyncio.Event) -> None:
        while not stop.is_set():
            await llm.execute("decoding", decode_batch(16))

    for kind, handle in others.items():
        op = _OTHER_OPS[kind]
        query = prose(12, next(salt))

        def batch() -> list[dict[str, Any]]:
            texts = [prose(220, next(salt)) for _ in range(8)]
            return [{"text": t} if op == "embedding" else {"query": query, "text": t} for t in texts]

        async def other_batch() -> float:
            clock = asyncio.get_running_loop().time
            t = clock()
            await handle.execute(op, batch())
            return clock() - t

        async def other_load(stop: asyncio.Event) -> None:
            while not stop.is_set():
                await handle.execute(op, batch())

        await other_batch()  # warm-up
        llm_alone, llm_loaded = await _paired(llm_step, other_load, repeats)
        other_alone, other_loaded = await _paired(other_batch, llm_load, repeats)
        if llm_alone and llm_loaded:
            slowdown["vllm"][kind] = round(max(1.0, llm_loaded / llm_alone), 3)
        if other_alone and other_loaded:
            slowdown[kind] = {"vllm": round(max(1.0, other_loaded / other_alone), 3)}
        fit[f"vllm|{kind}"] = {"decode_step_alone_s": llm_alone, "decode_step_loaded_s": llm_loaded}
        fit[f"{kind}|vllm"] = {"batch_alone_s": other_alone, "batch_loaded_s": other_loaded}
        say(f"contention: vllm decode step x{slowdown['vllm'].get(kind, float('nan')):.2f} while {kind} "
            f"computes; {kind} batch x{slowdown.get(kind, {}).get('vllm', float('nan')):.2f} while vllm decodes")
    exclusive = sorted(k for k, h in others.items() if getattr(h, "exclusive", False))
    return {"exclusive": exclusive, "slowdown": {k: v for k, v in slowdown.items() if v}, "fit": fit}


async def _decode_step(llm: Any, reqs: list[dict[str, Any]]) -> float | None:
    """The median decode iteration of one streamed batch (None when too few tokens streamed)."""
    from teola.sim.profiler import _timed_steps  # the profiler imports this module
    _, results, events = await _timed_steps(llm, reqs)
    steps = steady_steps(events, [int(r.get("num_prompt_tokens") or 0) for r in results])
    return steps["step_s"] if steps else None


async def _paired(measure: Callable[[], Awaitable[float | None]],
                  load: Callable[[asyncio.Event], Awaitable[None]],
                  repeats: int) -> tuple[float | None, float | None]:
    """Median of `measure` alone and while `load` runs batch after batch in the background,
    alternating. The load is stopped between batches, not cancelled mid-batch: a cancelled engine
    call may keep computing and overlap the next "alone" measurement."""
    alone: list[float] = []
    loaded: list[float] = []
    for _ in range(repeats):
        if (x := await measure()) is not None:
            alone.append(x)
        stop = asyncio.Event()
        task = asyncio.ensure_future(load(stop))
        try:
            await asyncio.sleep(0.2)  # let the load's first batch start
            if (x := await measure()) is not None:
                loaded.append(x)
        finally:
            stop.set()
            await task
    return (statistics.median(alone) if alone else None, statistics.median(loaded) if loaded else None)
