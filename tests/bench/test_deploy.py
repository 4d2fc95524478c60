"""The deployment study (bench/studies/remote/deploy.py): its statistics and prompt layout without engines,
and a quick run on real engines against emulated GPU servers checking equal work across the systems."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest

from bench.lib.llm_work import llm_calls
from bench.studies.remote.deploy import SYSTEMS, Settings, rotate
from bench.studies.remote.deploy_report import equal_work, markdown, paired, ratio_ci
from bench.studies.remote.deploy_systems import chat_messages


def test_rotation_interleaves_the_systems():
    orders = [rotate(SYSTEMS, k) for k in range(3)]
    assert orders == [
        ("teola", "LangGraph", "LlamaIndex"),
        ("LangGraph", "LlamaIndex", "teola"),
        ("LlamaIndex", "teola", "LangGraph"),
    ]
    assert [o[0] for o in orders] == list(SYSTEMS)  # each system goes first once


def test_ratio_ci_is_the_mean_ratio_inside_its_interval():
    ratio, lo, hi = ratio_ci([2.0, 4.0, 6.0, 8.0], [1.0, 2.0, 3.0, 4.0])
    assert ratio == pytest.approx(2.0)
    assert lo == pytest.approx(2.0) and hi == pytest.approx(2.0)  # every pair is exactly 2x
    ratio, lo, hi = ratio_ci([1.0, 3.0, 1.0, 3.0, 2.0], [2.0, 2.0, 2.0, 2.0, 2.0])
    assert ratio == pytest.approx(1.0) and lo < ratio < hi
    assert ratio_ci([], []) is None


def _entry(latencies, calls, ok=True):
    recs = [
        {"trial": 0, "i": i, "latency": x, "ok": ok, "calls": c, "prefills": 0, "busy": {"decoding": x}}
        for i, (x, c) in enumerate(zip(latencies, calls))
    ]
    server = {"request_success_total": 2.0, "prompt_tokens_total": 10.0, "generation_tokens_total": 4.0}
    return {"rate": None, "records": recs, "runs": [{"server": server, "loadavg": (1.0, 1.0, 1.0)}]}


def test_pairing_uses_only_queries_both_answered():
    a, b = _entry([1.0, 2.0], [[], []]), _entry([3.0, 4.0], [[], []])
    b["records"][0]["ok"] = False
    assert paired(a, b) == ([2.0], [4.0])


def test_equal_work_flags_a_call_whose_tokens_differ():
    same, other = [[[64, 72], [801, 96]]], [[[64, 72], [766, 96]]]
    w = equal_work(
        {"teola": _entry([1.0], same), "LangGraph": _entry([1.0], same), "LlamaIndex": _entry([1.0], other)}
    )
    assert w["LangGraph"]["same_as_teola"] == 1.0
    assert w["LlamaIndex"]["same_as_teola"] == 0.0
    assert w["teola"]["calls"] == 2 and w["teola"]["prompt"] == 865 and w["teola"]["output"] == 168


def test_llm_calls_count_a_split_decode_and_its_prefill_once():
    trace = [
        {"primitive": "synthesis.prefill", "op": "partial_prefilling", "num_prompt_tokens": 30},
        {
            "primitive": "expand[0]",
            "op": "partial_decoding",
            "num_prompt_tokens": 64,
            "num_output_tokens": 10,
        },
        {
            "primitive": "expand[1]",
            "op": "partial_decoding",
            "num_prompt_tokens": 64,
            "num_output_tokens": 72,
        },
        {"primitive": "synthesis", "op": "decoding", "num_prompt_tokens": 801, "num_output_tokens": 96},
    ]
    assert llm_calls(trace) == [[64, 72], [801, 96]]


def test_chat_messages_lay_out_the_parts_as_teolas_renderer():
    from engines.llm_text.llm_requests import PromptRenderer

    parts = [["instruction", "You answer."], ["examples", "Q: a"], ["question", "Q: b"]]
    expected = PromptRenderer.messages(object.__new__(PromptRenderer), [tuple(p) for p in parts], True)
    got = [
        {"role": {"system": "system", "human": "user"}[m.type], "content": m.content}
        for m in chat_messages(parts)
    ]
    assert got == expected


@pytest.mark.services
async def test_llamaindex_agent_calls_go_through_openai_like_with_langgraphs_prompt():
    """The LlamaIndex agents' LLM is llama-index's own OpenAILike on the chat API (not teola's adapter),
    sending the prompt LangGraph's ChatOpenAI sends: equal prompt tokens, max_tokens written."""
    from bench.lib.results import serve_in_thread
    from bench.studies.remote.deploy_systems import ChatOpenAIClient, OpenAILikeClient
    from engines.assets.paths import configure_engine_env
    from teola.emulate.server import create_emulator
    from teola.emulate.settings import EmulatorSettings

    configure_engine_env()
    url, server = serve_in_thread(
        create_emulator(EmulatorSettings("a100-llama3.1-8b-measured", output_len="max"))
    )
    try:
        req = {
            "parts": [["instruction", "You answer."], ["question", "Q: what is 2 + 2?"]],
            "max_tokens": 8,
            "stop": ["\n\n"],
        }
        client = OpenAILikeClient(url)
        assert type(client.llm(8)).__mro__[1].__name__ == "OpenAILike"
        (li,) = await client.execute("decoding", [dict(req)])
        (lg,) = await ChatOpenAIClient(url).execute("decoding", [dict(req)])
    finally:
        server.should_exit = True
    assert li["num_prompt_tokens"] == lg["num_prompt_tokens"] > 0
    assert li["num_output_tokens"] == lg["num_output_tokens"] == 8 and li["text"]


def test_the_page_names_the_emulated_profile():
    point = {s: _entry([1.0], [[[5, 3]]]) for s in SYSTEMS}
    data = {
        "settings": {**Settings.quick().__dict__},
        "workloads": {"tool_agent": {"rates": [], "points": {"alone": point}}},
    }
    md = markdown(data)
    assert "LLM emulated (profile a100-llama3.1-8b-measured), everything else measured" in md
    assert "1.00 [1.00, 1.00]" in md


@pytest.mark.engines
@pytest.mark.services
@pytest.mark.slow
def test_quick_run_does_equal_work_on_every_system():
    from bench.studies.remote.deploy import _main

    # --quick with 1 query alone and 2 at the rate per system (quick: 2 and 3): equal work is checked per
    # query, so fewer queries check the same thing on fewer calls; the full run is `python -m bench deploy`
    data = asyncio.run(_main(dataclasses.replace(Settings.quick(), alone=1, queries=2), progress=False))
    res = data["workloads"]["advanced_rag/small"]
    assert set(res["points"]) == {"alone", "x1"} and len(res["rates"]) == 1
    for point in res["points"].values():
        assert set(point) == set(SYSTEMS)
        assert all(r["ok"] for e in point.values() for r in e["records"]), point
        calls = {s: {(r["trial"], r["i"]): r["calls"] for r in e["records"]} for s, e in point.items()}
        assert calls["LangGraph"] == calls["teola"]  # same calls, prompt tokens per call, output tokens
        assert calls["LlamaIndex"] == calls["teola"]
        for per_query in calls["teola"].values():
            assert [out for _, out in per_query] == [72, 96]  # expansion and synthesis at their max_tokens


def test_the_result_json_keeps_what_the_page_reads_and_drops_the_filler_answers():
    from bench.lib.results import rounded, without_keys

    data = {
        "workloads": {"w": {"points": {"alone": {"teola": _entry([1.23456789], [[[10, 4]]])}}}},
        "wall_seconds": 12.3456789,
    }
    data["workloads"]["w"]["points"]["alone"]["teola"]["records"][0]["answer"] = "filler " * 50
    kept = rounded(without_keys(data, "answer"))
    record = kept["workloads"]["w"]["points"]["alone"]["teola"]["records"][0]
    assert "answer" not in record and record["latency"] == 1.2346
    assert kept["wall_seconds"] == 12.3457 and record["calls"] == [[10, 4]]
    assert record["ok"] is True  # booleans are not numbers to round
