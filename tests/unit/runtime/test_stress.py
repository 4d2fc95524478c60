"""500 concurrent queries on the simulated engines: each completes or fails with a QueryError, and
the runtime returns to its baseline (no leftover asyncio tasks, queued work or memory)."""

import asyncio
import gc
import tracemalloc

from engines.sim.sim_engine import SimEngine, clear_memos, sim_engines
from teola.runtime import QueryCancelled, QueryError
from tests.unit.runtime.test_runtime import make_rag

N = 500
SHORT_DOC = "paris is the capital of france and the seine runs through it"


async def run_batch(app, n, cancel_every=0):
    async def one(i):
        question = f"question {i} about paris" + (" EXPLODE" if i % 10 == 3 else "")
        compiled = app.compile({"question": question, "documents": [SHORT_DOC]})
        task = asyncio.ensure_future(app.runtime.run(compiled, {}))
        if cancel_every and i % cancel_every == 0:
            await asyncio.sleep(0)
            app.runtime.cancel(compiled.query_id)
        return await task

    return await asyncio.gather(*(one(i) for i in range(n)), return_exceptions=True)


async def settle(app):
    await app.runtime.wait_idle()
    for _ in range(3):
        await asyncio.sleep(0)
    gc.collect()


async def test_500_concurrent_queries_complete_or_fail_and_leave_nothing_behind():
    sims = sim_engines(record=False)
    sims["llm"] = SimEngine("llm", fail_on="EXPLODE", record=False)
    app = make_rag(sims)
    await app.start()
    try:
        await run_batch(app, 50, cancel_every=7)  # warm caches (graphs, plans, code paths)
        await settle(app)
        tracemalloc.start()
        base_tasks = len(asyncio.all_tasks())
        base_mem = tracemalloc.get_traced_memory()[0]

        results = await run_batch(app, N, cancel_every=25)
        ok = [r for r in results if not isinstance(r, BaseException)]
        errors = [r for r in results if isinstance(r, BaseException)]
        assert all(isinstance(e, QueryError) for e in errors), {type(e) for e in errors}
        cancelled = [e for e in errors if isinstance(e, QueryCancelled)]
        failed = [e for e in errors if not isinstance(e, QueryCancelled)]
        assert len(ok) + len(errors) == N
        assert all(isinstance(r.output, str) and r.output for r in ok)
        assert all(e.engine == "llm" and "EXPLODE" not in str(e.primitive) for e in failed)
        assert len(cancelled) == N // 25 - sum(1 for i in range(0, N, 25) if i % 10 == 3)
        assert len(failed) == sum(1 for i in range(N) if i % 10 == 3 and i % 25)

        await settle(app)
        assert len(asyncio.all_tasks()) == base_tasks
        assert app.runtime.running() == []
        assert all(n == 0 for n in app.runtime.queue_lengths().values())
        assert all(
            i.inflight == 0 and i.outstanding == 0 and i.tokens == 0
            for insts in app.runtime.instances.values()
            for i in insts
        )
        assert sims["vectordb"].store == {}  # every generated namespace was dropped
        del results, ok, errors, cancelled, failed
        clear_memos()  # the sim engines' bounded text-keyed memo caches are not per-query state
        gc.collect()
        grown = tracemalloc.get_traced_memory()[0] - base_mem
        tracemalloc.stop()
        assert grown < 512 * 1024, f"memory grew by {grown} bytes over {N} queries"
    finally:
        if tracemalloc.is_tracing():
            tracemalloc.stop()
        await app.stop()
