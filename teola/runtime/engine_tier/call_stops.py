"""Stopping preemptible calls in their engine (teola.runtime.engine_tier.preemption): a call aborted
by its tag (preempted: its requests come back with their token ids), or cancelled for good (its KV
not saved), and the KV an engine saved for a withdrawn call dropped. A failed stop is logged: the
call then runs to its end, or the saved copy waits for its least-recently-used drop."""

from __future__ import annotations

import logging

from engines.protocol import Capability
from teola.runtime.engine_tier.engine_context import EngineContext
from teola.runtime.engine_tier.running_call import RunningCall
from teola.runtime.executors.executor import Instance
from teola.scheduling.preemption import swap_keys

log = logging.getLogger("teola.runtime")


async def forget_kv_on(ctx: EngineContext, inst: Instance, keys: list[str]) -> None:
    try:
        await ctx.executor.call(inst, Capability.FORGET_KV, keys)
    except Exception as exc:  # the saved copy then waits for its least-recently-used drop
        log.warning(
            "engine %s: dropping the saved KV of a withdrawn call failed: %s: %s",
            inst.name,
            type(exc).__name__,
            exc,
        )


async def stop_call(ctx: EngineContext, call: RunningCall, cancel: bool = False) -> None:
    keys = swap_keys(call.requests)
    try:
        if cancel and keys and Capability.CANCEL in call.inst.capabilities:
            await ctx.executor.call(call.inst, Capability.CANCEL, [call.tag], keys)
        else:
            await ctx.executor.call(call.inst, Capability.ABORT, [call.tag])
    except Exception as exc:  # the call then runs to its end: only the engine time is lost
        call.stopping = False
        log.warning(
            "engine %s: stopping call %s failed: %s: %s",
            call.inst.name,
            call.pick.entry.name,
            type(exc).__name__,
            exc,
        )
        return
    if not call.stopping:
        ctx.metrics.aborted_requests += len(call.requests)
