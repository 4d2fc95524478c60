"""The benchmark's answer-quality and recall measures."""

from bench.lib.quality import contains, normalize, recall, score, texts, token_f1


def test_normalize_contains_and_f1():
    assert normalize("The  Eiffel, Tower!") == "eiffel tower"
    assert contains("It was built by Gustave Eiffel.", ["gustave eiffel"])
    assert not contains("It was built in Paris.", ["Gustave Eiffel"])
    assert token_f1("Gustave Eiffel built it", ["Gustave Eiffel"]) == 2 * 0.5 * 1.0 / 1.5
    assert token_f1("", ["x"]) == 0.0 and token_f1("no overlap", ["x y"]) == 0.0


def test_recall_finds_a_chunk_of_the_gold_passage():
    gold = "Mark Hunter starts a pirate radio station.\nHe is a loner at school."
    assert recall(["He is a loner at school."], gold)
    assert recall(["Mark   Hunter starts a pirate"], gold)  # whitespace differences do not matter
    assert not recall(["Another story entirely."], gold)
    assert texts([[{"text": "a"}, "b"], "c"]) == ["a", "b", "c"]
    s = score("Mark Hunter", ["He is a loner at school."], ["Mark Hunter"], gold)
    assert s == {"contains": True, "f1": 1.0, "answer_in_context": False, "recall": True}
    assert score("no", ["Mark Hunter starts"], ["Mark Hunter"], None)["answer_in_context"]


def test_doc_qa_counts_llm_work_per_call_and_renders_both_tables():
    from bench.studies.rag.doc_qa import markdown
    from bench.studies.rag.doc_qa_runs import llm_work, summarize
    from bench.studies.rag.doc_qa_systems import KEEP_EXPANSION

    trace = [
        {
            "primitive": "x.expand.decode[0]",
            "op": "partial_decoding",
            "num_prompt_tokens": 50,
            "num_output_tokens": 9,
        },
        {
            "primitive": "x.expand.decode[1]",
            "op": "partial_decoding",
            "num_prompt_tokens": 50,
            "num_output_tokens": 20,
        },
        {"primitive": "s.call0.decode", "op": "decoding", "num_prompt_tokens": 700, "num_output_tokens": 30},
        {"primitive": "s.call0.prefill", "op": "full_prefilling", "num_prompt_tokens": 700},
    ]
    assert llm_work(trace) == {
        "calls": 2,
        "prompt_tokens": 750,
        "decode_tokens": 50,
        "prefill_only": 0,
        "chunks": 0,
    }
    recs = [
        {
            "ok": True,
            "latency": 2.0,
            "calls": 2,
            "prompt_tokens": 750,
            "decode_tokens": 50,
            "contains": True,
            "f1": 0.5,
            "recall": True,
        },
        {"ok": False, "latency": 9.0, "error": "x"},
    ]
    row = summarize(recs)
    assert (row["n"], row["failed"], row["mean"], row["recall"]) == (2, 1, 2.0, 1.0)
    data = {
        "settings": {"n_alone": 1, "n_load": 1, "seed": 0, "sizes": {"small": 2}, "same_mode": "refine"},
        "runs": {
            "naive_rag/small": {
                "alone": {
                    "teola": row,
                    "LlamaIndex": {**row, "mean": 3.0},
                    KEEP_EXPANSION: {**row, "mean": 4.0},
                }
            },
            "advanced_rag/small/refine": {"alone": {"teola": row, "LlamaIndex": row}},
        },
    }
    md = markdown(data, "python -m bench doc_qa")
    assert "| naive_rag/small | alone | teola | 2 | 1 | 2.00 |" in md and "1.50x" in md
    assert (
        f"| naive_rag/small | alone | {KEEP_EXPANSION} | 2 | 1 | 4.00 |" in md and "0.75x" in md
    )  # its speed too
    assert "forced to `refine`" in md
    assert (
        "max efficient batch (stage decomposition splits indexing at it): 4 (bench.studies.rag.rag's" in md
    )  # an old page
    data["settings"]["embedding_batch"] = None
    assert "splits indexing at it): the engine's shipped default" in markdown(data, "python -m bench doc_qa")


def test_doc_qa_baseline_rows_show_teolas_speed_over_that_baseline():
    from bench.studies.rag.doc_qa import markdown

    row = {"n": 1, "failed": 0, "mean": 2.0}
    data = {
        "settings": {"n_alone": 1, "n_load": 1, "seed": 0, "sizes": {"small": 2}, "same_mode": None},
        "runs": {
            "naive_rag/small": {
                "alone": {
                    "teola": row,
                    "LlamaIndex": {**row, "mean": 3.0},
                    "LlamaDist-PO": {**row, "mean": 5.0},
                }
            }
        },
    }
    md = markdown(data, "python -m bench doc_qa --baselines LlamaDist-PO")
    line = next(x for x in md.splitlines() if "| LlamaDist-PO |" in x)
    assert "| 2.50x |" in line  # 5.0 / teola's 2.0, not LlamaIndex's 3.0 / 5.0


def test_doc_qa_runs_a_baseline_with_its_passes_and_policy(monkeypatch):
    import asyncio

    import bench.studies.rag.doc_qa_runs as dq
    from bench.studies.rag.rag_setup import SYSTEMS as RAG

    seen = []

    async def fake(app, q, nodes, arrival, passes=None, policy="topology"):
        seen.append((passes, policy))
        return {"ok": True}

    monkeypatch.setattr(dq, "teola_query", fake)
    systems = dq.Systems.__new__(dq.Systems)
    systems.app, systems.nodes, systems.rag = None, {}, None
    for name in ("teola", "LlamaDist-TO", "LlamaDistPC-PO"):
        asyncio.run(systems.one(name, {}))
    assert seen == [
        ({}, "topology"),
        (RAG["LlamaDist-TO"][0]["passes"], "to"),
        (RAG["LlamaDistPC-PO"][0]["passes"], "po"),
    ]
    assert seen[1][0]["module_chain"] and "module_chain" not in seen[2][0]


def test_doc_qa_rejects_an_unknown_baseline(capsys):
    import pytest

    from bench.__main__ import main

    with pytest.raises(SystemExit):
        main(["doc_qa", "--baselines", "LlamaDist-XX", "--quick"])
    assert "unknown baseline(s) ['LlamaDist-XX']" in capsys.readouterr().err


def test_wilson_interval_matches_hand_computed_bounds():
    from bench.lib.quality import wilson

    lo, hi = wilson(10, 40)  # p = 0.25, n = 40: 0.142 .. 0.402 (Wilson, z = 1.96)
    assert round(lo, 3) == 0.142 and round(hi, 3) == 0.402
    assert wilson(0, 10)[0] == 0.0 and wilson(10, 10)[1] == 1.0
    assert wilson(0, 0) == (0.0, 1.0)


def test_trace_diff_reads_runtime_traces():
    from bench.studies.sim.sim_trace_diff_page import edges, per_primitive

    run = {
        "latency": 1.5,
        "trace": [
            {"primitive": "embed", "engine": "embedding", "queued": 0.0, "started": 0.1, "finished": 0.3},
            {"primitive": "llm", "engine": "llm", "queued": 0.3, "started": 0.3, "finished": 1.2},
            {"primitive": "skipped", "queued": 0.3},
        ],
    }
    rows = per_primitive([run])
    assert set(rows) == {"embed", "llm"}
    assert abs(rows["embed"]["queued"] - 0.1) < 1e-9 and abs(rows["llm"]["running"] - 0.9) < 1e-9
    e = edges([run])
    assert e["before"] == 0.0 and abs(e["after"] - 0.3) < 1e-9 and e["latency"] == 1.5


def test_mcnemar_and_paired_difference_on_hand_computed_cases():
    from bench.lib.quality import mcnemar, paired_difference

    assert mcnemar(0, 0) == 1.0
    assert mcnemar(0, 5) == 2 / 32  # both tails of Binomial(5, 1/2) at 0
    assert abs(mcnemar(6, 10) - 0.4545) < 1e-3
    d = paired_difference([True, True, False, False], [True, False, True, True])
    assert (d["n"], d["only_a"], d["only_b"], d["diff"]) == (4, 1, 2, -0.25)
    assert d["lo"] < d["diff"] < d["hi"]
    try:
        paired_difference([True], [])
    except ValueError as e:
        assert "equal lengths" in str(e)
    else:
        raise AssertionError("unequal lengths must be refused")


def test_held_out_questions_are_disjoint_from_excluded_seeds_and_runs_pool(tmp_path):
    import json

    from bench.lib.workloads import narrative_qa_queries
    from bench.studies.rag.doc_qa_quality import held_out_queries, pool

    assert held_out_queries(4, 2, 1, [], 0) == narrative_qa_queries(4, 2, 1)
    seen = {(q["question"], q["gold"]) for s in (0, 1) for q in narrative_qa_queries(50, 0, s)}
    new = held_out_queries(60, 2, 2, [0, 1], 50)
    assert len(new) == 60 and not {(q["question"], q["gold"]) for q in new} & seen
    recs = lambda hits: {"records": [{"ok": True, "contains": h} for h in hits]}  # noqa: E731
    for i, (a, b) in enumerate([([1, 0], [0, 0]), ([0, 1], [0, 0])]):
        (tmp_path / f"{i}.json").write_text(
            json.dumps({"runs": {"f": {"teola": recs(a), "LlamaIndex": recs(b)}}})
        )
    got = pool([str(tmp_path / "0.json"), str(tmp_path / "1.json")])["f"]
    assert (got["n"], got["only_a"], got["only_b"]) == (4, 2, 0)


def test_stop_rules_cut_a_greedy_reply_where_the_engine_would_stop():
    from bench.studies.rag.stop_rules import SENTENCE_STOPS, cut_at, evaluate

    reply = "Paris is the capital. It is in France.\n\nParis is the capital."
    assert cut_at(reply, ("\n\n",)) == "Paris is the capital. It is in France."
    assert cut_at(reply, SENTENCE_STOPS) == "Paris is the capital"
    assert cut_at("no stop here", ("\n",)) == "no stop here"

    class Words:  # a whitespace tokenizer: reply tokens are words
        def __call__(self, text, add_special_tokens=False):
            return {"input_ids": text.split()}

    data = {
        "n": 2,
        "seed": 0,
        "runs": {
            "f": {
                "teola": {
                    "records": [
                        {"question": "q1", "ok": True, "reply": "blue sky. green grass"},
                        {"question": "q2", "ok": False, "reply": "green"},
                    ]
                }
            }
        },
    }
    import bench.studies.rag.stop_rules as sr

    real = sr.gold_answers
    sr.gold_answers = lambda d: [["green grass"], ["green"]]
    try:
        out = evaluate(
            data, {"none": lambda t: t, "first sentence": lambda t: cut_at(t, SENTENCE_STOPS)}, Words()
        )
    finally:
        sr.gold_answers = real
    cell = out["f"]["teola"]
    assert (
        cell["none"]["contains_k"] == 1 and cell["first sentence"]["contains_k"] == 0
    )  # a failed query never counts
    assert (
        cell["none"]["tokens"] == 2.0 and cell["first sentence"]["tokens"] == 1.0
    )  # (4 + 0) / 2 and (2 + 0) / 2


def test_sim_paper_large_documents_hold_about_a_hundred_chunks():
    import bench.studies.sim.sim_paper as sp
    from teola.compile.chunking import chunk_text

    sp._docs = "large"
    try:
        q = sp.queries("advanced_rag", 1)[0]
    finally:
        sp._docs = "small"
    chunks = [c for d in q["documents"] for c in chunk_text(d, 256, 30)]
    assert len(q["documents"]) == sp.LARGE_DISTRACTORS + 1 and len(chunks) > 60
    assert "answers" not in q and "gold" not in q


def test_step_timing_times_busy_steps_against_the_cost_and_marks_other_engines():
    from bench.studies.sim.step_timing import busy_intervals, step_rows, summary

    cost = {"base": 0.01, "prefill_token": 0.001, "decode_seq": 0.02, "context_token": 0.0}
    runs = [
        {
            "trace": [
                {"engine": "embedding", "started": 0.5, "finished": 1.0},
                {"engine": "llm", "started": 0.0, "finished": 3.0},
            ]
        }
    ]
    busy = busy_intervals(runs, [1.0])  # the embedder ran 1.5-2.0 s into the trace
    assert busy == [(1.5, 2.0)]
    log = [
        (0.0, 1, 100, 1),  # a prefill step: its gap is not timed (nothing before it)
        (0.06, 1, 0, 1),  # decode, 60 ms against 30 ms modelled
        (0.12, 1, 0, 0),  # decode, 60 ms; nothing left running after it
        (5.0, 2, 50, 2),  # after an idle gap: not timed
        (5.1, 2, 0, 2),
    ]
    rows = step_rows(log, cost, busy, context_per_seq=0)
    assert [round(r["measured"], 3) for r in rows] == [0.06, 0.06, 0.1]
    assert rows[0]["predicted"] == 0.03 and not rows[0]["other_busy"]
    assert rows[2]["decode"] == 2 and rows[2]["predicted"] == 0.05
    busy_rows = step_rows([(1.6, 1, 0, 1), (1.7, 1, 0, 1)], cost, busy, 0)
    assert busy_rows[0]["other_busy"]
    [g] = summary(rows)
    assert g["steps"] == 3 and not g["prefill"] and abs(g["ratio"] - 2.0) < 1e-9
