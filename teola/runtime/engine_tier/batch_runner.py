"""How an engine scheduler's batch runs once the scheduler decided it, through the narrow
`EngineContext`: the scheduler decides (queue + policy -> picks); these functions execute.

- `run_batch`: on the engine through the executor; every entry gets its results together, a
  failure isolated to the query that caused it (`isolate`).
- `run_each`: on an engine that batches continuously (vLLM) for a policy that `returns_each`
  (topology-aware batching): the entries' requests go to the engine together, but each entry gets
  its results as soon as its own requests end, not when the batch's longest one does.
- `run_item_stream` / `item_stream`: Partial Decoding batches whose items go to their entries as
  they are parsed; `text_stream`: batches whose requests asked for their decoded text as it comes
  (the answer's tokens).
The instance's slot is released (`ctx.landed`) when a batch lands."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from engines.protocol import Capability, StreamEvent
from engines.stream_events import Delta, Item
from teola.runtime.engine_tier.engine_context import EngineContext, Span
from teola.runtime.engine_tier.stream_consumer import Streamed, consume
from teola.runtime.engine_tier.supervisor import down_error
from teola.runtime.executors.executor import Instance, checked_results
from teola.scheduling.base import Pending, Pick

log = logging.getLogger("teola.runtime")


async def run_batch(
    ctx: EngineContext,
    inst: Instance,
    op: str,
    requests: list[dict[str, Any]],
    spans: list[Span],
    tokens: int,
    picks: list[Pick],
) -> None:
    """Run one batch to its end; every entry gets its results together (or its failure). Its text
    streams as it decodes when a request asked for it ("stream_text")."""
    t0 = ctx.loop.time()
    try:
        try:
            if any(r.get("stream_text") for r in requests):
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
            e.work.results(a, results[off : off + n], t)
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
        reqs = [e.wire(i) for e, a, b in mine for i in range(a, b)]
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
            e.work.results(a, results[off : off + b - a], t)
            off += b - a


async def run_item_stream(
    ctx: EngineContext,
    inst: Instance,
    op: str,
    requests: list[dict[str, Any]],
    spans: list[Span],
    tokens: int,
    picks: list[Pick],
) -> None:
    """Run a Partial Decoding batch: items go to their entries as they are parsed."""
    owners = [e for e, a, b in spans for _ in range(a, b)]
    t0 = ctx.loop.time()
    try:
        finals = await item_stream(ctx, inst, op, requests, owners, isolate=True)
        ctx.observe(picks, t0, ctx.loop.time(), finals)
    finally:
        ctx.landed(inst, requests, spans, tokens)


async def abort_on(
    ctx: EngineContext, inst: Instance, owners: list[str], kv_keys: list[str] | None = None
) -> None:
    """Ask `inst` to stop the running requests of `owners` (query ids or request tags) for good;
    `kv_keys`: the KV swap keys among them, which an adapter with `cancel` tells its engine not to
    save (those calls never resume)."""
    try:
        if kv_keys and Capability.CANCEL in inst.capabilities:
            stopped = await ctx.executor.call(inst, Capability.CANCEL, owners, kv_keys)
        else:
            stopped = await ctx.executor.call(inst, Capability.ABORT, owners)
    except Exception as exc:  # the batch still lands; only the engine time is not saved
        log.warning(
            "engine %s: aborting the requests of %s failed: %s: %s",
            inst.name,
            ", ".join(owners),
            type(exc).__name__,
            exc,
        )
        return
    ctx.metrics.aborted_requests += int(stopped or 0)


async def run_each(
    ctx: EngineContext,
    inst: Instance,
    op: str,
    requests: list[dict[str, Any]],
    spans: list[Span],
    tokens: int,
    picks: list[Pick],
) -> None:
    """Run the batch, one engine call per entry, all at once; hand each entry its results when they
    land. A failure fails only the entry whose requests failed (engine down: every failed entry gets
    the engine-down error). The batch's slot on the instance is released when its last entry lands."""
    loop = ctx.loop
    t0 = loop.time()
    results: list[Any] = [None] * len(requests)
    offsets, off = [], 0
    for _, a, b in spans:
        offsets.append(off)
        off += b - a

    async def one(e: Pending, a: int, b: int, at: int) -> BaseException | None:
        try:
            mine = requests[at : at + b - a]
            if any(r.get("stream_text") for r in mine):  # an answer whose tokens stream to the client
                res = await text_stream(ctx, inst, op, mine, [(e, a, b)])
            else:
                res = await ctx.executor.execute(inst, op, mine)
            res = checked_results(ctx.name, res, b - a)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 -- reported to this entry's work below
            return exc
        results[at : at + b - a] = res
        e.work.results(a, res, loop.time())
        return None

    try:
        errors = await asyncio.gather(*(one(e, a, b, at) for (e, a, b), at in zip(spans, offsets)))
        failed = [(e, exc) for (e, _, _), exc in zip(spans, errors) if exc is not None]
        if failed:
            alive = await ctx.alive(inst, failed[0][1])
            for e, exc in failed:
                e.work.failed(exc if alive else down_error(ctx.name, inst, exc), inst)
        ctx.observe(picks, t0, loop.time(), results)
    finally:
        ctx.landed(inst, requests, spans, tokens)


async def text_stream(
    ctx: EngineContext, inst: Instance, op: str, requests: list[dict[str, Any]], spans: list[Span]
) -> list[Any]:
    """Run a batch whose requests asked for their text as it decodes ("stream_text"): each
    delta's text goes to its work at once; the finals are the batch's results."""
    owners = [e for e, a, b in spans for _ in range(a, b)]

    def delta(idx: int, payload: Delta, t: float) -> None:
        owners[idx].work.delta(payload.text, t)

    return await consume(ctx, inst, op, requests, {StreamEvent.DELTA: delta})


async def item_stream(
    ctx: EngineContext,
    inst: Instance,
    op: str,
    requests: list[dict[str, Any]],
    owners: list[Pending],
    isolate: bool,
) -> list[Any] | None:
    """Run one streaming batch. If it fails, requests that already streamed something fail; the
    others are retried one query at a time (when the batch mixed queries) so only the culprit fails."""
    got = Streamed.of(len(owners))

    def item(idx: int, payload: Item, t: float) -> None:
        owners[idx].work.item(payload.text, t)

    def final(idx: int, payload: Any, t: float) -> None:
        owners[idx].work.final(payload, t)

    try:
        return await consume(
            ctx, inst, op, requests, {StreamEvent.ITEM: item, StreamEvent.FINAL: final}, seen=got, strict=True
        )
    except asyncio.CancelledError:
        raise
    except Exception as exc:
        if not await ctx.alive(inst, exc):
            for i in sorted(got.open):
                owners[i].work.failed(down_error(ctx.name, inst, exc), inst)
            return None
        retry = [i for i in sorted(got.open) if i not in got.heard]
        queries = {owners[i].query_id for i in retry}
        for i in sorted(got.open):
            if i in got.heard or not isolate or len({o.query_id for o in owners}) == 1:
                owners[i].work.failed(exc, inst)
        if isolate and len({o.query_id for o in owners}) > 1:
            for qid in queries:
                mine = [i for i in retry if owners[i].query_id == qid]
                await item_stream(
                    ctx, inst, op, [requests[i] for i in mine], [owners[i] for i in mine], False
                )
        return None
