"""`python -m bench pass_gate` in its quick mode on simulated engines (virtual time): per pass, the
prediction is read back from the e-graph's gate lines and sits beside the measured effect of the pass
on against off."""

import json

import bench.lib.results as results
from bench.__main__ import main
from bench.studies.overheads.pass_gate import gates

TEXT = """%0 = llm.prefilling() :: a.call.prefill reads[] writes[a.kv] [depth=1 n=1]
return a.text
# gate decode_pipelining query_expansion.expand.decode: pipelined, predicted gain +1680 ms (fitted at start)
# gate prefill_split synthesis.call0.prefill: kept whole, predicted gain -61 ms (cpu-smollm2-135m)
# gate decode_pipelining plan.call.decode: kept whole, predicted gain +0 ms (t); no costs for tools.call
# gate prefill_split answer.call.prefill: kept whole, costs not used (fitted at start, fit error 15% \
over 10%)"""


def test_gate_lines_are_read_back_per_pass():
    assert gates(TEXT, "prefill_split") == [
        {
            "call": "synthesis.call0.prefill",
            "applies": False,
            "gain_s": -0.061,
            "costs": "cpu-smollm2-135m",
            "note": "",
        },
        {
            "call": "answer.call.prefill",
            "applies": False,
            "gain_s": 0.0,
            "costs": "fitted at start, fit error 15% over 10%",
            "note": "costs not used",
        },
    ]
    d, t = gates(TEXT, "decode_pipelining")
    assert d["applies"] and d["gain_s"] == 1.68 and d["costs"] == "fitted at start"
    assert not t["applies"] and t["gain_s"] == 0.0 and t["note"] == "no costs for tools.call"


def test_quick_simulated_run_writes_predicted_and_measured_per_pass(tmp_path, monkeypatch):
    monkeypatch.setattr(results, "RESULTS", tmp_path)
    assert (
        main(
            [
                "pass_gate",
                "--quick",
                "--simulate",
                "cpu-smollm2-135m",
                "--apps",
                "advanced_rag",
                "--out",
                "pass_gate_test",
            ]
        )
        == 0
    )
    data = json.loads((tmp_path / "overheads" / "pass_gate_test.json").read_text())
    rows = data["apps"]["advanced_rag"]["passes"]
    assert set(rows) == {"prefill_split", "decode_pipelining"}
    (split,) = rows["prefill_split"]
    # the synthesis prompt starts with constant text: the gate predicts a loss and keeps it whole
    assert split["gates"] and not split["gate_applies"] and split["predicted_s"] < 0
    (pipe,) = rows["decode_pipelining"]
    assert pipe["gate_applies"] and pipe["predicted_s"] > 0  # the expansion's 3 queries overlap its decode
    for row in (split, pipe):
        assert row["on"]["latency"] > 0 and row["off"]["latency"] > 0
        assert row["effect_s"] == row["off"]["latency"] - row["on"]["latency"]
    # forcing the split on sends one prefill-only request more than off
    assert split["on"]["llm_requests"] == split["off"]["llm_requests"] + 1
    page = (tmp_path / "overheads" / "pass_gate_test.md").read_text()
    assert page.startswith("## SIMULATED") and "| advanced_rag | decode_pipelining | 1 | 1 of 1 |" in page
