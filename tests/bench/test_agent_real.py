"""bench.studies.programs.agent_real's accounting (no engines: the run itself is a benchmark): which tools a
call asked for, how they are grouped, and the pairing of questions that did the same work."""

from __future__ import annotations

from bench.studies.programs.agent_real import markdown, tools_called
from bench.studies.programs.agent_real_page import same_work, tool_groups
from bench.studies.programs.agent_real_setup import SYSTEMS

CALL = '\n<tool>{"name": "%s", "arguments": {}}</tool>\n<result>r</result>\n'


def test_the_tool_each_continuation_follows_is_counted():
    segs = [
        {"text": "q"},
        {"text": "q" + CALL % "calculator"},
        {"text": "q" + CALL % "calculator" + '<tool>{"name": math</tool>\n<result>e</result>\n'},
    ]
    assert tools_called(segs) == ["calculator", "bad call"]


def test_tools_outside_the_app_are_grouped():
    assert tool_groups({"wikipedia": 2, "math": 3, "france": 1, "bad call": 4}) == {
        "calculator": 0,
        "wikipedia": 2,
        "web": 0,
        "bad call": 4,
        "other name": 4,
    }


def row(system: str, lat: list[float], tokens: list[list[int]], trial: int = 0) -> dict:
    return {
        "rate": 1.0,
        "trial": trial,
        "system": system,
        "mean_s": sum(lat) / len(lat),
        "p99_s": max(lat),
        "first_mean_s": 1.0,
        "first_p99_s": 1.0,
        "segments": 2,
        "decode_tokens": 10,
        "mae": 3.0,
        "handlings": {"preserve": 0, "discard": 1, "swap": 1},
        "tools": {"wikipedia": 1},
        "answers": ["a"],
        "per_question": [{"latency": x, "tools": ["wikipedia"], "tokens": t} for x, t in zip(lat, tokens)],
    }


def test_only_questions_with_identical_work_everywhere_are_paired():
    rows = [
        row("FCFS+INFERCEPT", [2.0, 9.0], [[5, 7], [5, 9]]),
        row("SJF", [3.0, 4.0], [[5, 7], [5, 8]]),
        row("LAMPS", [1.0, 5.0], [[5, 7], [5, 8]]),
    ]
    line = same_work(rows, 1.0)
    assert line.startswith("- 1 q/s: 1 questions")  # the second question decoded 9 tokens under FCFS
    assert "FCFS+INFERCEPT 2.00 s" in line and "LAMPS 1.00 s" in line
    data = {
        "rows": rows,
        "train": {"segments": 10, "questions": 4, "alone_s": 2.0, "mean_tokens": 30.0},
        "requests": 2,
        "trials": 1,
        "cap": 8,
        "command": "python -m bench agent_real",
        "wall_s": 60,
        "load": 1.0,
    }
    page = markdown(data)
    assert (
        all(f"| 1 | {s} |" in page for s in SYSTEMS) and "| -45% |" in page
    )  # LAMPS 3.0 s against FCFS 5.5 s


async def test_each_segment_records_the_handling_its_pause_got_from_the_trace():
    # (the predictor kept the request it was handed, whose handling was still "auto": the record is
    # resolved after the prediction) The app's "auto" is resolved when each segment is queued; the
    # trace row of a pausing segment names the handling applied, and each segment its own tokens.
    from bench.studies.programs.agent_real import Segments
    from tests.unit.compile.test_agent_component import CALL as TOOL_CALL
    from tests.unit.compile.test_agent_component import agent_app

    segments = Segments(encoder=None)
    app, llm = agent_app([TOOL_CALL, "391 is the product."], handling="auto")
    await app.start(length_predictor=segments)
    try:
        compiled = app.compile({"question": "What is 17 times 23?"})
        res = await app.execute(compiled)
    finally:
        await app.stop()
    segs = segments.outputs(compiled.query_id, res.trace)
    assert [s["handling"] for s in segs] == [r["pause_kv"] for r in llm.requests] == ["discard", "discard"]
    decoded = {
        t["primitive"]: t["num_output_tokens"]
        for t in res.trace
        if t["primitive"].endswith(".decode") and t["status"] == "ok"
    }
    assert [s["output_tokens"] for s in segs] == [decoded["agent.seg0.decode"], decoded["agent.seg1.decode"]]
