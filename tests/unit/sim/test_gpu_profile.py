"""A GPU profile built from measured operator tables (teola/sim/gpu_profile.py) on a tiny hand-made
table: its token table, attention and base terms, and the iteration time the simulator then takes,
each against a hand computation; the CLI reads the tables from a folder given by an env var; the
planner uses the measured table of each tensor-parallel degree."""

from __future__ import annotations

import csv
import gzip
import json

import pytest

from engines.sim.cost import IterationCost
from engines.sim.profile import load_profile
from teola.cli import main
from teola.plan.cost import ModelCost
from teola.sim.gpu_profile import build_gpu_profile, knot_tokens

# per-layer operator medians (ms) at tp=1 and 1 or 4 tokens; 8 tokens doubles them; tp=2 halves the GEMMs
GEMMS_TP1 = {"attn_pre_proj": 0.1, "attn_post_proj": 0.05, "mlp_up_proj": 0.2, "mlp_down_proj": 0.15}
DIMS = {
    "n_head": 2,
    "n_kv_head": 2,
    "n_embd": 8,
    "n_expanded_embd": 16,
    "vocab_size": 32,
    "use_gated_mlp": True,
}


def _op_row(tp: int, tokens: int) -> dict[str, object]:
    scale = (2.0 if tokens == 8 else 1.0) / tp
    ops = {op: ms * scale for op, ms in GEMMS_TP1.items()}
    ops |= {"add": 0.01 * (2.0 if tokens == 8 else 1.0), "emb": 0.005 * (2.0 if tokens == 8 else 1.0)}
    return {
        **{f"time_stats.{op}.median": ms for op, ms in ops.items()},
        **DIMS,
        "num_tokens": tokens,
        "num_tensor_parallel_workers": tp,
    }


def _write(path, rows: list[dict[str, object]]) -> None:
    with gzip.open(path, "wt", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


@pytest.fixture
def tables(tmp_path):
    _write(
        tmp_path / "compute__a100__meta-llama__Tiny__mlp.csv.gz",
        [_op_row(tp, n) for tp in (1, 2) for n in (1, 4, 8)],
    )
    # message bytes = tokens x hidden x 2: 16 bytes per token here
    _write(
        tmp_path / "network__a100_dgx__all_reduce.csv.gz",
        [
            {
                "time_stats.all_reduce.median": ms,
                "num_workers": 2,
                "devices_per_node": 2,
                "size": size,
                "collective": "all_reduce",
            }
            for size, ms in ((16, 0.01), (256, 0.05))
        ]
        + [
            {
                "time_stats.all_reduce.median": 9.0,
                "num_workers": 2,
                "devices_per_node": 1,
                "size": 16,
                "collective": "all_reduce",
            }
        ],
    )  # across nodes: not the one a tensor-parallel group uses
    return tmp_path


def test_the_token_table_is_layers_times_the_operators_plus_the_embedding_once(tables):
    cost = build_gpu_profile(tables, "a100", "Tiny", layers=2)["engines"]["vllm"]["cost"]
    table = dict((n, s) for n, s in cost["token_table"])
    assert sorted(table) == knot_tokens(8) == [1, 2, 3, 4, 6, 8]
    assert table[4] == pytest.approx((2 * 0.51 + 0.005) / 1000)  # 0.51 ms per layer
    assert table[6] == pytest.approx((2 * 0.765 + 0.0075) / 1000)  # halfway between 4 and 8 tokens
    assert table[8] == pytest.approx((2 * 1.02 + 0.01) / 1000)


def test_attention_and_base_come_from_the_achieved_bandwidth_and_the_datasheet(tables):
    entry = build_gpu_profile(tables, "a100", "Tiny", layers=2)["engines"]["vllm"]
    cost = entry["cost"]
    # layer weights 8 x (8 + 16) + 8 x 8 + 3 x 8 x 16 = 640 params = 1,280 bytes read in the GEMMs' 0.5 ms
    gbps = 1280 / 0.0005 / 1e9
    assert entry["cost_provenance"]["achieved_gbps"]["value"] == pytest.approx(round(gbps, 1))
    assert cost["base"] == pytest.approx(0.002 + 2 * 32 * 8 / (gbps * 1e9))  # CPU step + LM head
    assert cost["context_token"] == pytest.approx(2 * 2 * 8 * 2 / (gbps * 1e9), rel=1e-3)  # K and V, 2 layers
    assert cost["prefill_attention"] == pytest.approx(1000 * 4 * 8 * 2 / (312e12 * 0.5), rel=1e-3)
    kinds = {k: v["kind"] for k, v in entry["cost_provenance"].items()}
    assert kinds["token_table"] == "measured" and kinds["context_token"] == "derived"
    assert (
        kinds["prefill_attention"] == "assumed"
        and entry["cost_provenance"]["base"]["parts"]["cpu_step_s"]["kind"] == "assumed"
    )


def test_a_decode_iteration_costs_what_the_hand_computation_says(tables):
    cost = IterationCost(
        **load_profile(build_gpu_profile(tables, "a100", "Tiny", layers=2))["engines"]["vllm"]["cost"]
    )
    # 4 sequences with 100 context tokens each: base 2.2 ms + table(4) 1.025 ms + 400 x 25 us of KV reads
    assert cost.seconds(0, 4, 400) == pytest.approx(0.0022 + 0.001025 + 400 * 2.5e-5, rel=1e-3)


def test_tensor_parallel_adds_two_all_reduces_per_layer_and_the_planner_uses_that_table(tables):
    profile = build_gpu_profile(tables, "a100", "Tiny", tp=2, layers=2)
    table = dict((n, s) for n, s in profile["engines"]["vllm"]["cost"]["token_table"])
    # 4 tokens: 64-byte messages, 0.01 + 0.04 x 48 / 240 = 0.018 ms each, 2 per layer
    assert table[4] == pytest.approx((2 * 0.26 + 0.005 + 2 * 2 * 0.018) / 1000)
    assert "parallel" not in profile["engines"]["vllm"]  # a tp=2 replica is not one GPU's cost
    one = build_gpu_profile(tables, "a100", "Tiny", layers=2)
    assert one["engines"]["vllm"]["parallel"]["tp_degrees"] == [1, 2]
    planned = ModelCost(one).iteration(2)
    assert planned.table_seconds(4) == pytest.approx(table[4])


def test_the_cli_reads_the_tables_from_the_env_var_and_writes_a_loadable_profile(
    tables, tmp_path, monkeypatch, capsys
):
    monkeypatch.setenv("TEOLA_GPU_MEASURED", str(tables))
    out = tmp_path / "tiny.json"
    assert (
        main(
            [
                "profile",
                "--from-measured",
                "--model",
                "Tiny",
                "--layers",
                "2",
                "--base",
                "a100-llama2-7b",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    data = load_profile(out)
    assert data["provenance"] == "measured-operators" and data["name"] == "tiny"
    assert "sentence_transformers" in data["engines"]  # kept from the base profile
    assert data["engines"]["vllm"]["max_num_seqs"] == 256
    assert json.loads(out.read_text())["engines"]["vllm"]["cost"]["token_table"][0][0] == 1
    assert (
        main(["profile", "--from-measured", str(tmp_path / "none"), "--model", "Tiny", "--layers", "2"]) == 2
    )
    assert "not found" in capsys.readouterr().err


def test_the_token_table_is_flat_below_and_extends_its_last_slope_above():
    cost = IterationCost(base=0.001, token_table=[[1, 0.01], [4, 0.01], [8, 0.03]])
    assert cost.table_seconds(0) == 0.0 and cost.table_seconds(1) == 0.01
    assert cost.table_seconds(6) == pytest.approx(0.02)
    assert cost.table_seconds(12) == pytest.approx(0.05)
    assert cost.seconds(3, 3, 0) == pytest.approx(0.001 + 0.02)  # 6 tokens: prefill and decode together
    with pytest.raises(ValueError, match="token_table"):
        IterationCost(token_table=[[4, 0.01], [2, 0.02]])
