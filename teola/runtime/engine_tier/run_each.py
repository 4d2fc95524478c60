"""How an engine scheduler runs a batch on an engine that batches continuously (vLLM) for a policy
that `returns_each` (topology-aware batching): the entries' requests go to the engine together, but
each entry gets its results as soon as its own requests end, not when the batch's longest one does,
so a query's short decode never waits for a longer one it was batched with."""
from __future__ import annotations

import asyncio
from typing import Any

from teola.runtime.engine_tier.engine_context import EngineContext
from teola.runtime.executors.executor import Instance, checked_results
from teola.policies.base import Pending, Pick
from teola.runtime.engine_tier.stream_batches import text_stream
from teola.runtime.engine_tier.supervisor import down_error


async def run_each(ctx: EngineContext, inst: Instance, op: str, requests: list[dict[str, Any]],
                   spans: list[tuple[Pending, int, int]], tokens: int, picks: list[Pick]) -> None:
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
            mine = requests[at:at + b - a]
            if any(r.get("stream_text") for r in mine):  # an answer whose tokens stream to the client
                res = await text_stream(ctx, inst, op, mine, [(e, a, b)])
            else:
                res = await ctx.executor.execute(inst, op, mine)
            res = checked_results(ctx.name, res, b - a)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 -- reported to this entry's work below
            return exc
        results[at:at + b - a] = res
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
