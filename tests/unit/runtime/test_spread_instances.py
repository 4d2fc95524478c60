"""The default balancer spreads work that is ready at once over the free instances (engine_scheduler
`_limits`), instead of giving the first free instance the whole queue while the others idle."""

import asyncio

from apps.naive_rag import build
from teola.sim.run import query_variants, run_virtual, use_profile


async def _llm_instances(app, n):
    await app.start()
    try:
        results = await asyncio.gather(*(app.run(q) for q in query_variants(app.sample()[0], n)))
    finally:
        await app.stop()
    return [sorted({t["instance"] for t in r.trace if t["engine"] == "llm"}) for r in results]


def test_four_calls_ready_at_once_go_two_to_each_of_two_idle_llm_instances():
    app = build()
    use_profile(app, "cpu-smollm2-135m", {"llm": 2})
    used = run_virtual(_llm_instances(app, 4))
    assert all(len(u) == 1 for u in used)  # each query's prefill and decode on one instance
    flat = [u[0] for u in used]
    assert sorted(flat) == ["llm/0", "llm/0", "llm/1", "llm/1"]


def test_one_instance_still_takes_the_whole_batch():
    app = build()
    use_profile(app, "cpu-smollm2-135m", {"llm": 1})
    used = run_virtual(_llm_instances(app, 4))
    assert [u for u in used] == [["llm/0"]] * 4
