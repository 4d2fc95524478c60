"""Smoke test of the end-to-end RAG benchmark harness (bench/rag.py) on the real engines: naive RAG,
two queries, one rate, teola and one baseline; checks the structure of the results, never timings.
The apps start once for this module."""
from __future__ import annotations

import math

import pytest

pytestmark = pytest.mark.engines


@pytest.fixture(scope="module")
async def smoke():
    from bench.rag import Settings, bench, make_apps, markdown, speedups
    from engines.paths import configure_engine_env

    configure_engine_env()
    settings = Settings(apps=("naive_rag",), systems=("teola", "LlamaDist-PO"), rates=("high",),
                        n_queries={"high": 2}, passages=2, ablations=(), warmup=False,
                        nodes={"synthesis": {"max_tokens": 16}})
    apps = make_apps(settings.apps)
    for app in apps.values():
        await app.start()
    try:
        data = await bench(apps, settings, progress=False)
    finally:
        for app in apps.values():
            await app.stop()
    data["machine"] = {"cpu": "test", "cores": 0, "commit": "test"}
    return data, markdown(data, "pytest"), speedups(data)


async def test_results_structure(smoke):
    data, _, _ = smoke
    res = data["apps"]["naive_rag"]
    iso = res["isolated"]
    assert len(iso["records"]) == 2 and len(iso["bounds"]) == 2
    assert all(r["ok"] for r in iso["records"]), [r.get("error") for r in iso["records"]]
    assert all(b > 0 for b in iso["bounds"])
    runs = res["runs"]["high"]
    assert set(runs) == {"teola", "LlamaDist-PO"}
    for system, entry in runs.items():
        s = entry["summary"]
        assert s["n"] == 2 and s["failed"] == 0, (system, s["errors"])
        for key in ("mean", "p50", "p99", "bound_ratio_mean"):
            assert math.isfinite(s[key]) and s[key] > 0, (system, key)
        assert {"embedding", "searching"} <= set(s["by_op"])
        for rec in entry["records"]:
            assert rec["trace"] and {"primitive", "op", "queued", "started", "finished"} <= set(rec["trace"][0])
    cp = runs["teola"]["critical_path"]
    assert set(cp) >= {"compile", "queueing", "execution", "scheduling_comm"}
    assert all(v >= 0 for v in cp.values())


async def test_baseline_graphs_differ(smoke):
    data, _, _ = smoke
    runs = data["apps"]["naive_rag"]["runs"]["high"]
    teola_ops = {t["op"] for r in runs["teola"]["records"] for t in r["trace"]}
    chain_ops = {t["op"] for r in runs["LlamaDist-PO"]["records"] for t in r["trace"]}
    assert "partial_prefilling" in teola_ops
    assert "partial_prefilling" not in chain_ops


async def test_report(smoke):
    _, md, rows = smoke
    assert [r["baseline"] for r in rows] == ["LlamaDist-PO"]
    assert math.isfinite(rows[0]["mean"])
    assert "| naive_rag | high | LlamaDist-PO |" in md
    assert "Critical path" in md
