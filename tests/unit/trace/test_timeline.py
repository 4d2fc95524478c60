"""The timeline helpers and the text Gantt on hand-made traces."""

import pytest

from teola.trace.gantt import CRITICAL, QUEUED, RUNNING, gantt
from teola.trace.timeline import batch_mates, critical_path, interval, path_times


def entry(name, engine, q, s, f, batch=None, size=None, requests=1, **extra):
    return {
        "primitive": name,
        "engine": engine,
        "queued": q,
        "started": s,
        "finished": f,
        "status": "ok",
        "batch_id": batch,
        "batch_size": size,
        "requests": requests,
        **extra,
    }


# expand.prefill -> expand.decode -> synth.decode; index.embed -> synth.decode (finishes earlier)
TRACE = [
    entry("expand.prefill", "llm", 0.0, 0.1, 0.2, "llm:1", 1),
    entry("index.embed", "embedding", 0.0, 0.0, 0.5, "embedding:1", 8, requests=4),
    entry("expand.decode", "llm", 0.2, 0.3, 0.9, "llm:2", 3, num_cached_tokens=32),
    entry("synth.decode", "llm", 0.9, 1.0, 2.0, "llm:3", 1),
    {
        "primitive": "late.dropped",
        "engine": "llm",
        "queued": 0.5,
        "started": None,
        "finished": None,
        "status": "dropped",
    },
]
PARENTS = {
    "synth.decode": ["expand.decode", "index.embed"],
    "expand.decode": ["expand.prefill"],
    "expand.prefill": [],
    "index.embed": [],
}


def test_interval_and_critical_path():
    assert interval(TRACE[0]) == (0.0, 0.1, 0.2) and interval(TRACE[-1]) is None
    assert critical_path(TRACE, PARENTS) == ["expand.prefill", "expand.decode", "synth.decode"]
    # restricted to the graph's edges: index.embed is no parent of expand.decode
    assert critical_path(TRACE, {**PARENTS, "synth.decode": ["index.embed"]}) == [
        "index.embed",
        "synth.decode",
    ]
    assert critical_path([]) == []


def test_critical_path_walks_through_a_fused_prefill():
    # the decode is dispatched with its prefill (fused: one engine call), so it was queued before
    # the prefill finished; the path ends at the decode (depth 0) and goes on through the prefill
    trace = [
        entry("rerank", "reranker", 0.0, 0.0, 1.0, depth=2),
        entry("synth.prefill", "llm", 1.0, 1.1, 2.0, depth=1, fused_into="synth.decode"),
        entry("synth.decode", "llm", 1.0, 1.1, 2.0, depth=0, fused_with="synth.prefill"),
    ]
    parents = {"synth.decode": ["synth.prefill"], "synth.prefill": ["rerank"], "rerank": []}
    assert critical_path(trace, parents) == ["rerank", "synth.prefill", "synth.decode"]


# A prefill fused into its decode whose decode also reads a key an ancestor of the prefill made
# (expand.decode): the pair is dispatched once rerank is done, so rerank is on the path, not expand.
FUSED = [
    entry("expand.decode", "llm", 0.0, 0.0, 0.3),
    entry("rerank", "reranker", 0.35, 0.4, 1.0),
    entry("synth.prefill", "llm", 1.0, 1.2, 2.0, fused_into="synth.decode"),
    entry("synth.decode", "llm", 1.0, 1.2, 2.0, fused_with="synth.prefill"),
]
FUSED_PARENTS = {
    "expand.decode": [],
    "rerank": ["expand.decode"],
    "synth.prefill": ["rerank", "expand.decode"],
    "synth.decode": ["synth.prefill", "expand.decode"],
}


def test_critical_path_goes_through_the_fused_prefill_before_an_earlier_parent():
    by_hand = ["expand.decode", "rerank", "synth.prefill", "synth.decode"]
    # without depths (bench records keep none): the decode, not its fused prefill, ends the path
    assert critical_path(FUSED, FUSED_PARENTS) == by_hand
    with_depth = [{**e, "depth": d} for e, d in zip(FUSED, (3, 2, 1, 0))]
    assert critical_path(with_depth, FUSED_PARENTS) == by_hand


def test_path_times_count_one_dispatch_once():
    times = path_times(FUSED, critical_path(FUSED, FUSED_PARENTS))
    # by hand: synth pair runs 1.2-2.0 after queueing 1.0-1.2; rerank waits 0.35-0.4 and runs
    # 0.4-1.0 after a 0.3-0.35 gap; expand runs 0-0.3
    assert times == pytest.approx({"running": 0.8 + 0.6 + 0.3, "queued": 0.2 + 0.05, "gap": 0.05})
    # a prefill fused with a streamed group: its hop ends when the first item came (1.5)
    stream = [
        entry("p", "llm", 0.0, 0.5, 1.5, fused_into="m0"),
        entry("m0", "llm", 0.0, 0.5, 1.5),
        entry("m1", "llm", 0.0, 0.5, 2.5),
    ]
    path = critical_path(stream, {"p": [], "m0": ["p"], "m1": ["p"]})
    assert path == ["p", "m1"]
    assert path_times(stream, path) == pytest.approx({"running": 2.0, "queued": 0.5, "gap": 0.0})
    assert path_times(stream, []) == {"gap": 0.0, "queued": 0.0, "running": 0.0}


def test_batch_mates_count_requests_of_other_queries():
    assert batch_mates(TRACE) == {
        "expand.prefill": 0,
        "index.embed": 4,
        "expand.decode": 2,
        "synth.decode": 0,
    }


def test_gantt_rows_grouped_by_engine_with_queued_running_and_critical_marks():
    text = gantt(TRACE, width=40, parents=PARENTS)
    lines = text.splitlines()
    assert "2000 ms" in lines[0]
    assert lines.index("embedding:") < lines.index("llm:")  # engines in order of first use
    rows = {ln.split("|")[0].strip(" *"): ln for ln in lines if "|" in ln[2:]}
    assert "late.dropped" not in rows  # never ran: no bar
    bar = lambda name: rows[name].split("|")[1]  # noqa: E731
    assert rows["synth.decode"].startswith("* ") and rows["index.embed"].startswith("  ")
    # synth.decode: queued 0.9-1.0 s, running 1.0-2.0 s of 2.0 s in 40 columns
    assert bar("synth.decode") == " " * 18 + QUEUED * 2 + CRITICAL * 19 + " "
    assert bar("index.embed") == RUNNING * 10 + " " * 30
    assert "b=3 mates=2 c=32" in rows["expand.decode"]
    assert len({len(bar(n)) for n in rows}) == 1


def test_gantt_edge_cases():
    assert gantt([]) == "(no primitive ran)"
    with pytest.raises(ValueError, match="width"):
        gantt(TRACE, width=3)
    same = [entry("ctl.agg", None, 0.0, 0.0, 0.0)]
    assert "(control):" in gantt(same)
