"""A request trace as a simulation workload (teola/sim/trace_workload.py) on a tiny hand-made trace:
arrivals relative to the first row, each query's LLM call taking its row's prompt and output length,
rows cut to the model's context, and `teola simulate --trace`."""

from __future__ import annotations

import pytest

from apps import naive_rag
from engines.sim.text import LengthSampler
from teola.cli import main
from teola.sim.run import query_variants, simulate
from teola.sim.trace_workload import TraceLengths, TraceRequest, fit_context, read_trace, use_trace
from tests.unit.sim.test_simulate import PROFILE, QUERY

ROWS = [(10.0, 50, 5), (10.5, 400, 40), (12.0, 9000, 100)]


@pytest.fixture
def trace(tmp_path):
    path = tmp_path / "trace.csv"
    path.write_text(
        "arrived_at,num_prefill_tokens,num_decode_tokens\n" + "".join(f"{a},{p},{d}\n" for a, p, d in ROWS),
        encoding="utf-8",
    )
    return path


def test_rows_arrive_relative_to_the_first_and_a_limit_keeps_the_first_rows(trace):
    assert read_trace(trace) == [
        TraceRequest(0.0, 50, 5),
        TraceRequest(0.5, 400, 40),
        TraceRequest(2.0, 9000, 100),
    ]
    assert len(read_trace(trace, limit=2)) == 2
    with pytest.raises(ValueError, match="missing column"):
        bad = trace.with_name("bad.csv")
        bad.write_text("t,prompt\n1,2\n", encoding="utf-8")
        read_trace(bad)


def test_a_row_longer_than_the_context_is_cut_output_first_to_half_then_prompt():
    assert fit_context(TraceRequest(0, 9000, 100), 4096) == (3996, 100)
    assert fit_context(TraceRequest(0, 9000, 3000), 4096) == (2048, 2048)
    assert fit_context(TraceRequest(0, 50, 5), 4096) == (50, 5)


def test_each_querys_calls_take_their_rows_lengths_and_others_the_fallback():
    lengths = TraceLengths(
        [TraceRequest(0, 50, 5), TraceRequest(1, 400, 40)], LengthSampler({"text": [7]}), 4096
    )
    assert (
        lengths.prompt_tokens("text", "[['question', 'Why? (user 1)']]"),
        lengths.sample("text", "... (user 1)", 16),
    ) == (400, 40)  # not capped by max_tokens
    assert lengths.prompt_tokens("text", "(user 12)") is None and lengths.sample("text", "(user 12)", 16) == 7


def test_a_simulation_follows_the_traces_arrivals_and_output_lengths(trace):
    requests = read_trace(trace)
    llms = []

    def start(app):
        use_trace(app, requests)
        for inst in app.runtime.instances["llm"]:
            inst.handle.record_iterations = True
            llms.append(inst.handle)

    report = simulate(
        naive_rag.build(),
        PROFILE,
        1.0,
        query_variants(QUERY, 3),
        arrivals=[r.arrived_at for r in requests],
        on_start=start,
    )
    assert report.failed == 0 and report.span > 2.0
    decoded = sum(n for h in llms for _, _, n, _ in h.iterations)
    # every query decodes its row's output: the first token with the prefill, the rest one per iteration
    assert decoded == sum(d - 1 for _, _, d in ROWS)


def test_simulate_takes_a_trace_on_the_command_line(trace, capsys):
    assert main(["simulate", "naive_rag", "--profile", "a100-llama2-7b-measured", "--trace", str(trace)]) == 0
    assert "trace trace.csv" in capsys.readouterr().out
