"""A request trace as the workload of `teola simulate --trace FILE` (beside the synthetic Poisson one):
each row of a CSV (optionally gzipped) with `arrived_at` (seconds), `num_prefill_tokens` and
`num_decode_tokens` (the Azure LLM inference traces' columns, e.g. Splitwise's conversation and code
traces as the Vidur project ships them) becomes one query of the app, arriving at its time relative
to the first row; each LLM decoding call of that query takes the row's prompt length and decodes the
row's output length (not capped by the call's max_tokens: the trace is what users asked for). A row
longer than the model's context is cut to fit: its output to at most half the context, then its
prompt to the rest."""

from __future__ import annotations

import csv
import gzip
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from teola.api.app import App

COLUMNS = ("arrived_at", "num_prefill_tokens", "num_decode_tokens")
_USER = re.compile(r"\(user (\d+)\)")  # the mark teola.sim.run.query_variants puts in each query


@dataclass(frozen=True, slots=True)
class TraceRequest:
    """One trace row: arrival (seconds from the trace's first row), prompt and output tokens."""

    arrived_at: float
    prefill: int
    decode: int


def read_trace(path: str | Path, limit: int | None = None) -> list[TraceRequest]:
    """The first `limit` rows (all when None) of the trace at `path`, arrivals from the first row's."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"--trace {path}: no such file")
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8", newline="") as f:
        reader = csv.DictReader(f)
        missing = [c for c in COLUMNS if c not in (reader.fieldnames or [])]
        if missing:
            raise ValueError(f"--trace {path}: missing column(s) {missing} (needs {', '.join(COLUMNS)})")
        rows = []
        for row in reader:
            if limit is not None and len(rows) >= limit:
                break
            rows.append(
                (float(row["arrived_at"]), int(row["num_prefill_tokens"]), int(row["num_decode_tokens"]))
            )
    if not rows:
        raise ValueError(f"--trace {path}: no requests")
    t0 = min(a for a, _, _ in rows)
    return [TraceRequest(a - t0, max(1, p), max(1, d)) for a, p, d in sorted(rows)]


def fit_context(req: TraceRequest, max_model_len: int) -> tuple[int, int]:
    """(prompt, output) tokens of `req` cut to fit `max_model_len` (see the module docstring)."""
    if req.prefill + req.decode <= max_model_len:
        return req.prefill, req.decode
    decode = min(req.decode, max_model_len // 2)
    return min(req.prefill, max_model_len - decode), decode


class TraceLengths:
    """A simulated LLM's lengths from a trace: a call of query i (its prompt holds "(user i)") takes
    row i's prompt and output lengths; other calls go to `fallback` (the engine's own sampler)."""

    def __init__(self, requests: list[TraceRequest], fallback: Any, max_model_len: int) -> None:
        self.rows = [fit_context(r, max_model_len) for r in requests]
        self.fallback = fallback

    def _row(self, key: str) -> tuple[int, int] | None:
        m = _USER.search(key)
        return self.rows[int(m.group(1))] if m and int(m.group(1)) < len(self.rows) else None

    def prompt_tokens(self, kind: str, key: str) -> int | None:
        row = self._row(key)
        return row[0] if row else self.fallback.prompt_tokens(kind, key)

    def sample(self, kind: str, key: str, max_tokens: int) -> int:
        row = self._row(key)
        return row[1] if row else self.fallback.sample(kind, key, max_tokens)


def use_trace(app: App, requests: list[TraceRequest]) -> None:
    """Give every simulated LLM instance of a started app the trace's lengths."""
    for insts in app.runtime.instances.values():
        for inst in insts:
            handle = inst.handle
            if hasattr(handle, "sampler") and hasattr(handle, "max_model_len"):
                handle.sampler = TraceLengths(requests, handle.sampler, handle.max_model_len)


def trace_rate(requests: list[TraceRequest]) -> float:
    """Mean arrival rate of the trace, requests/s (over its span; 1.0 for a single request)."""
    span = requests[-1].arrived_at - requests[0].arrived_at
    return (len(requests) - 1) / span if span > 0 else 1.0
