"""How an engine scheduler's batch runs once the scheduler decided it: on the engine through the
executor, its results handed to each entry's work, a failure isolated to the query that caused it,
the instance's slot released when the batch lands. The scheduler decides (queue + policy -> picks);
these functions execute, through the narrow `EngineContext`."""
from __future__ import annotations

import asyncio
import logging
from typing import Any

from teola.policies.base import Pick
from teola.runtime.engine_tier.engine_context import EngineContext, Span
from teola.runtime.engine_tier.stream_batches import item_stream, text_stream
from teola.runtime.engine_tier.supervisor import down_error
from teola.runtime.executors.executor import Instance, checked_results

log = logging.getLogger("teola.runtime")


async def run_batch(ctx: EngineContext, inst: Instance, op: str, requests: list[dict[str, Any]],
                    spans: list[Span], tokens: int, picks: list[Pick], text: bool = False) -> None:
    """Run one batch to its end; every entry gets its results together (or its failure)."""
    t0 = ctx.loop.time()
    try:
        try:
            if text:
                results = await text_stream(ctx, inst, op, requests, spans)
            else:
                results = await ctx.executor.execute(inst, op, requests)
            results = checked_results(ctx.name, results, len(requests))
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            if not await ctx.alive(inst, exc):
                for e, _, _ in spans:
                    e.work.failed(down_error(ctx.name, inst, exc), inst)
                return
            await isolate(ctx, inst, op, spans, exc)
            return
        t = ctx.loop.time()
        off = 0
        for e, a, b in spans:
            n = b - a
            e.work.results(a, results[off:off + n], t)
            off += n
        ctx.observe(picks, t0, t, results)
    finally:
        ctx.landed(inst, requests, spans, tokens)


async def isolate(ctx: EngineContext, inst: Instance, op: str, spans: list[Span], exc: Exception) -> None:
    """A batch failed. With requests of one query, that query's primitives fail. With several
    queries, each query's requests are retried alone so only the culprit's query fails."""
    queries = {e.query_id for e, _, _ in spans}
    if len(queries) == 1:
        for e, _, _ in spans:
            e.work.failed(exc, inst)
        return
    for qid in queries:
        mine = [s for s in spans if s[0].query_id == qid]
        reqs = [r for e, a, b in mine for r in e.requests[a:b]]
        try:
            results = await ctx.executor.execute(inst, op, reqs)
            results = checked_results(ctx.name, results, len(reqs))
        except asyncio.CancelledError:
            raise
        except Exception as exc2:
            for e, _, _ in mine:
                e.work.failed(exc2, inst)
            continue
        t = ctx.loop.time()
        off = 0
        for e, a, b in mine:
            e.work.results(a, results[off:off + b - a], t)
            off += b - a


async def run_item_stream(ctx: EngineContext, inst: Instance, op: str, requests: list[dict[str, Any]],
                          spans: list[Span], tokens: int, picks: list[Pick]) -> None:
    """Run a Partial Decoding batch: items go to their entries as they are parsed."""
    owners = [e for e, a, b in spans for _ in range(a, b)]
    t0 = ctx.loop.time()
    try:
        finals = await item_stream(ctx, inst, op, requests, owners, isolate=True)
        ctx.observe(picks, t0, ctx.loop.time(), finals)
    finally:
        ctx.landed(inst, requests, spans, tokens)


async def abort_on(ctx: EngineContext, inst: Instance, owners: list[str]) -> None:
    """Ask `inst` to stop the running requests of `owners` (query ids or request tags)."""
    try:
        stopped = await ctx.executor.call(inst, "abort", owners)
    except Exception as exc:  # the batch still lands; only the engine time is not saved
        log.warning("engine %s: aborting the requests of %s failed: %s: %s", inst.name, ", ".join(owners),
                    type(exc).__name__, exc)
        return
    ctx.metrics.aborted_requests += int(stopped or 0)
