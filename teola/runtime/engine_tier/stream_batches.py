"""The two streaming ways an engine scheduler runs a batch: Partial Decoding batches whose items
go to their works as they are parsed (`item_stream`), and batches whose requests asked for their
decoded text as it comes (`text_stream`, for the answer's tokens)."""
from __future__ import annotations

import asyncio
from typing import Any

from teola.runtime.engine_tier.engine_context import EngineContext
from teola.runtime.executors.executor import Instance
from teola.policies.base import Pending
from teola.runtime.engine_tier.supervisor import down_error


async def text_stream(ctx: EngineContext, inst: Instance, op: str, requests: list[dict[str, Any]],
                       spans: list[tuple[Pending, int, int]]) -> list[Any]:
    """Run a batch whose requests asked for their text as it decodes ("stream_text"): each
    ("delta", text) goes to its work at once; the finals are the batch's results."""
    owners = [e for e, a, b in spans for _ in range(a, b)]
    finals: list[Any] = [None] * len(requests)
    got = 0
    async for idx, kind, payload in ctx.executor.stream(inst, op, requests):
        if not 0 <= idx < len(owners):
            raise RuntimeError(f"engine {ctx.name!r} streamed request index {idx} of a {len(owners)}-request batch")
        if kind == "delta":
            owners[idx].work.delta(payload, ctx.loop.time())
        elif kind == "final":
            finals[idx] = payload
            got += 1
    if got != len(requests):
        raise RuntimeError(f"engine {ctx.name!r} ended a stream with {got} of {len(requests)} final results")
    return finals


async def item_stream(ctx: EngineContext, inst: Instance, op: str, requests: list[dict[str, Any]],
                      owners: list[Pending], isolate: bool) -> list[Any] | None:
    """Run one streaming batch. If it fails, requests that already streamed something fail; the
    others are retried one query at a time (when the batch mixed queries) so only the culprit fails."""
    open_ = set(range(len(owners)))
    heard: set[int] = set()
    finals: list[Any] = [None] * len(owners)
    try:
        async for idx, kind, payload in ctx.executor.stream(inst, op, requests):
            if not 0 <= idx < len(owners):
                raise RuntimeError(f"engine {ctx.name!r} streamed request index {idx} "
                                   f"of a {len(owners)}-request batch")
            t = ctx.loop.time()
            heard.add(idx)
            if kind == "item":
                owners[idx].work.item(payload, t)
            elif kind == "final":
                open_.discard(idx)
                finals[idx] = payload
                owners[idx].work.final(payload, t)
            else:
                raise RuntimeError(f"engine {ctx.name!r} streamed an event of kind {kind!r} "
                                   "(expected 'item' or 'final')")
        if open_:
            raise RuntimeError(f"engine {ctx.name!r} ended a stream without a final result "
                               f"for {len(open_)} request(s)")
        return finals
    except asyncio.CancelledError:
        raise
    except Exception as exc:
        if not await ctx.alive(inst, exc):
            for i in sorted(open_):
                owners[i].work.failed(down_error(ctx.name, inst, exc), inst)
            return None
        retry = [i for i in sorted(open_) if i not in heard]
        queries = {owners[i].query_id for i in retry}
        for i in sorted(open_):
            if i in heard or not isolate or len({o.query_id for o in owners}) == 1:
                owners[i].work.failed(exc, inst)
        if isolate and len({o.query_id for o in owners}) > 1:
            for qid in queries:
                mine = [i for i in retry if owners[i].query_id == qid]
                await item_stream(ctx, inst, op, [requests[i] for i in mine], [owners[i] for i in mine], False)
        return None
