"""Measured GPU operator tables, read from the gzipped CSVs of the Vidur project's profiling runs
(microsoft/vidur, MIT licence; the files and their columns are described where they are kept, e.g.
../shared/data/gpu-measured/README.md):

- `compute__<gpu>__meta-llama__<model>__mlp.csv.gz`: every non-attention operator of one transformer
  layer timed per number of tokens in the iteration and tensor-parallel degree (column
  `time_stats.<op>.median`, milliseconds);
- `network__<gpu>_<topology>__all_reduce.csv.gz`: NCCL all-reduce time per message size and number of
  workers. `size` is in bytes: Vidur's own predictor turns it into tokens as size / hidden / 2
  (vidur/execution_time_predictor/sklearn_execution_time_predictor.py), and read as bytes the
  largest 2-GPU NVLink message runs at 195 GB/s, inside the A100's 300 GB/s per direction.

Only the Python standard library reads them, so the simulator does not need pandas.
"""

from __future__ import annotations

import csv
import gzip
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

# every operator of a layer but the embedding lookup, which an iteration runs once, not per layer
LAYER_OPS = (
    "input_layernorm",
    "attn_pre_proj",
    "attn_rope",
    "attn_post_proj",
    "post_attention_layernorm",
    "mlp_up_proj",
    "mlp_act",
    "mlp_down_proj",
    "add",
)
# the operators that read the layer's weight matrices (all of its bytes but the norms')
GEMM_OPS = ("attn_pre_proj", "attn_post_proj", "mlp_up_proj", "mlp_down_proj")
DIM_COLUMNS = ("n_head", "n_kv_head", "n_embd", "n_expanded_embd", "vocab_size", "use_gated_mlp")


def compute_file(data_dir: Path, gpu: str, model: str) -> Path:
    return Path(data_dir) / f"compute__{gpu}__meta-llama__{model}__mlp.csv.gz"


def network_file(data_dir: Path, gpu: str, topology: str) -> Path:
    return Path(data_dir) / f"network__{gpu}_{topology}__all_reduce.csv.gz"


@dataclass(slots=True)
class OperatorTable:
    """One model's per-layer operator medians (ms) by (tensor-parallel degree, tokens), and its shape."""

    path: Path
    dims: dict[str, int | bool]
    ops: dict[tuple[int, int], dict[str, float]] = field(default_factory=dict)

    def degrees(self) -> list[int]:
        return sorted({tp for tp, _ in self.ops})

    def tokens(self, tp: int) -> list[int]:
        return sorted(n for t, n in self.ops if t == tp)

    def layer_ms(self, tp: int, tokens: int, ops: Iterable[str] = LAYER_OPS) -> float:
        """Sum of the medians of `ops` of one layer at `tokens` tokens (linear between measured
        token counts, along the last two beyond them)."""
        ops = tuple(ops)
        points = [(n, sum(self.ops[(tp, n)].get(op, 0.0) for op in ops)) for n in self.tokens(tp)]
        return interpolate(points, tokens)

    def op_ms(self, tp: int, tokens: int, op: str) -> float:
        return self.layer_ms(tp, tokens, (op,))


def read_operator_table(path: Path) -> OperatorTable:
    """The compute table at `path`; rows measured twice for one (degree, tokens) are averaged."""
    rows = _rows(path)
    shapes = {tuple(r[c] for c in DIM_COLUMNS) for r in rows}
    if len(shapes) != 1:
        raise ValueError(
            f"{path}: expected the operators of one model shape, found {len(shapes)} ({sorted(shapes)})"
        )
    shape = next(iter(shapes))
    dims: dict[str, int | bool] = {
        c: (v == "True") if c == "use_gated_mlp" else int(v) for c, v in zip(DIM_COLUMNS, shape)
    }
    sums: dict[tuple[int, int], dict[str, list[float]]] = {}
    for r in rows:
        key = (int(r["num_tensor_parallel_workers"]), int(r["num_tokens"]))
        cell = sums.setdefault(key, {})
        for col, value in r.items():
            if col.startswith("time_stats.") and col.endswith(".median") and value not in ("", None):
                cell.setdefault(col[len("time_stats.") : -len(".median")], []).append(float(value))
    ops = {k: {op: sum(v) / len(v) for op, v in cell.items()} for k, cell in sums.items()}
    return OperatorTable(Path(path), dims, ops)


def read_allreduce_table(path: Path) -> dict[int, list[tuple[int, float]]]:
    """{workers: [(message bytes, median ms), ...]} for all-reduces inside one node (devices per node =
    workers, as a tensor-parallel group of one machine runs them), sizes ascending."""
    out: dict[int, dict[int, list[float]]] = {}
    for r in _rows(path):
        if r.get("collective", "all_reduce") != "all_reduce" or r["devices_per_node"] != r["num_workers"]:
            continue
        out.setdefault(int(r["num_workers"]), {}).setdefault(int(r["size"]), []).append(
            float(r["time_stats.all_reduce.median"])
        )
    return {w: sorted((s, sum(v) / len(v)) for s, v in sizes.items()) for w, sizes in out.items()}


def interpolate(points: list[tuple[int, float]], x: float) -> float:
    """Piecewise-linear through `points` (x ascending): flat below the first, along the last two
    points' slope beyond the last."""
    if not points:
        raise ValueError("cannot interpolate an empty table")
    if x <= points[0][0] or len(points) == 1:
        return points[0][1]
    for (x0, y0), (x1, y1) in zip(points, points[1:]):
        if x <= x1:
            return y0 + (y1 - y0) * (x - x0) / (x1 - x0)
    (x0, y0), (x1, y1) = points[-2], points[-1]
    return y1 + (y1 - y0) * (x - x1) / (x1 - x0)


def _rows(path: Path) -> list[dict[str, str]]:
    path = Path(path)
    if not path.is_file():
        raise ValueError(
            f"measured table {path} not found (give the folder of the measured GPU data, "
            f"e.g. --from-measured ../shared/data/gpu-measured)"
        )
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8", newline="") as f:
        return list(csv.DictReader(f))
