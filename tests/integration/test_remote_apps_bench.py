"""The core of `python -m bench.remote_apps` on the real engines (the session's vLLM, the loopback
search/tool service over the Postgres wiki corpus, with its delays scaled down): every system
answers every query, and on a query run alone the three systems do the same work (greedy decoding:
the same LLM calls, decode tokens, searches and tool calls)."""
from __future__ import annotations

import pytest
from tqdm import tqdm

from bench.remote_apps import APPS, Settings, bench_app, make_apps, work
from bench.remote_services import ServiceProcess
from tests.support.borrowed import Borrowed

pytestmark = pytest.mark.engines


async def test_remote_apps_quick_core_same_work_in_every_system(llm_engine):
    settings = Settings(rates={a: (2.0,) for a in APPS}, n_queries=1, trials=1, alone=1, latency_scale=0.1)
    async with ServiceProcess(seed=0, scale=settings.latency_scale) as svc:
        apps = make_apps(APPS, svc)
        for app in apps.values():
            app.backends["llm"] = Borrowed(llm_engine)
            await app.start()
        try:
            results = {name: await bench_app(app, settings, tqdm(disable=True)) for name, app in apps.items()}
        finally:
            for app in apps.values():
                await app.stop()
        calls = await svc.calls()
    for name, res in results.items():
        for rate, systems in res["runs"].items():
            assert set(systems) == {"teola", "LlamaIndex", "LangGraph"}
            for system, entry in systems.items():
                failed = [r.get("error") for r in entry["records"] if not r.get("ok")]
                assert not failed, f"{name} {rate} {system}: {failed}"
        alone = {system: work(e["records"][0]) for system, e in res["runs"]["alone"].items()}
        keys = ("llm_calls", "decode_tokens", "searches", "tool_calls")
        assert all({k: w[k] for k in keys} == {k: alone["teola"][k] for k in keys} for w in alone.values()), alone
        assert alone["teola"]["llm_calls"] >= 1
    assert calls["search"] + sum(calls[t] for t in ("calculator", "convert_units", "weather", "wiki_lookup")) > 0
