"""The engine's load during a point of the SIMULATED LAMPS study (bench/studies/sim/sim_lamps.py), sampled
in virtual time: calls running and waiting, paused calls holding KV, KV in use, busy time and swap stalls."""

from __future__ import annotations

import asyncio
import statistics
from typing import Any

TICK = 1.0  # seconds between load samples
OVERLOAD = 1000  # calls waiting at which a point stops: overloaded (its queue would only keep growing)


async def sample(
    rt: Any, llm: Any, start: float, stop: float, tick: float = TICK, overload: int = OVERLOAD
) -> dict[str, Any]:
    """The engine's load every `tick` seconds over [start, stop): calls running in it, calls waiting
    (teola's queue + the engine's), paused calls holding KV (preserved), KV blocks in use; and the
    engine's busy time and swap stalls over the span. Stops early ("overloaded_at") once more than
    OVERLOAD calls wait."""
    loop = asyncio.get_running_loop()
    sched = rt.schedulers["llm"]
    await asyncio.sleep(max(0.0, start - loop.time()))
    before = dict(llm.stats)
    running, waiting, preserved, used, held_kv, in_engine = [], [], [], [], [], []
    overloaded = None
    while loop.time() < stop:
        running.append(len(llm.running))
        waiting.append(sched.queued() + len(llm.waiting))
        preserved.append(sum(1 for e in llm.paused.values() if e.held is not None))
        used.append(1 - llm.pool.free / llm.pool.num_blocks)
        held_kv.append(
            sum(e.held.blocks for e in llm.paused.values() if e.held is not None) / llm.pool.num_blocks
        )
        in_engine.append(len(llm.waiting))
        if waiting[-1] > overload:
            overloaded = loop.time()
            break
        await asyncio.sleep(tick)
    span = max(tick, loop.time() - start)
    fifth = max(1, len(waiting) // 5)
    return {
        "running": statistics.fmean(running),
        "waiting": statistics.fmean(waiting),
        "waiting_first": statistics.fmean(waiting[:fifth]),
        "waiting_last": statistics.fmean(waiting[-fifth:]),
        "waiting_series": waiting,
        "preserved": statistics.fmean(preserved),
        "kv_used": statistics.fmean(used),
        "kv_preserved": statistics.fmean(held_kv),
        "engine_waiting": statistics.fmean(in_engine),
        "kv_max": max(used),
        "busy": (llm.stats["busy_s"] - before["busy_s"]) / span,
        "overloaded_at": overloaded,
        "swap_share": (llm.stats["swapped_blocks"] - before["swapped_blocks"])
        * llm.swap_seconds_per_block
        / span,
    }
