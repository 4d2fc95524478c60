"""A query's timeline as a text Gantt chart (what `teola run` and `teola query` print under the
timing table): one row per primitive, grouped by engine, `-` while queued at its engine, `#` while
running (`=` for primitives on the critical path, which is also marked `*` before the name)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from teola.trace.timeline import batch_mates, critical_path, interval

QUEUED, RUNNING, CRITICAL = "-", "#", "="
LABEL = 30


def gantt(
    trace: Sequence[Mapping[str, Any]], width: int = 60, parents: Mapping[str, Sequence[str]] | None = None
) -> str:
    """The text Gantt of `trace` (Result.trace) in `width` columns of time. `parents` (primitive
    name -> parent names) makes the critical path follow the e-graph's edges."""
    if width < 10:
        raise ValueError(f"gantt width must be at least 10 columns, got {width}")
    rows = [(e, iv) for e in trace if (iv := interval(e)) is not None]
    if not rows:
        return "(no primitive ran)"
    end = max(iv[2] for _, iv in rows) or 1e-9
    on_path = set(critical_path(trace, parents))
    mates = batch_mates(trace)
    groups: dict[str, list[tuple[Mapping[str, Any], tuple[float, float, float]]]] = {}
    for e, iv in sorted(rows, key=lambda r: (r[1][0], r[1][1], str(r[0].get("primitive")))):
        groups.setdefault(str(e.get("engine") or "(control)"), []).append((e, iv))
    out = [f"{'':{LABEL + 2}}|{'0 ms':<{width // 2}}{f'{1000 * end:.0f} ms':>{width - width // 2}}|"]
    for engine, members in groups.items():
        out.append(f"{engine}:")
        for e, iv in members:
            name = str(e.get("primitive", "?"))
            crit = name in on_path
            label = ("* " if crit else "  ") + (name if len(name) <= LABEL else name[: LABEL - 1] + "~")
            out.append(f"{label:<{LABEL + 2}}|{_bar(iv, end, width, crit)}|{_note(e, mates.get(name, 0))}")
    out.append(
        f"{QUEUED} queued  {RUNNING} running  {CRITICAL} running on the critical path (*)  "
        f"b: batch size  mates: requests of other queries in the batch  c: cached prompt tokens"
    )
    return "\n".join(out)


def _bar(iv: tuple[float, float, float], end: float, width: int, critical: bool) -> str:
    def col(t: float) -> int:
        return min(width - 1, int(t / end * width))

    q, s, f = col(iv[0]), col(iv[1]), col(iv[2])
    cells = [" "] * width
    for i in range(q, s):
        cells[i] = QUEUED
    for i in range(s, max(f, s + 1)):
        cells[i] = CRITICAL if critical else RUNNING
    return "".join(cells)


def _note(e: Mapping[str, Any], mates: int) -> str:
    bits = []
    if e.get("batch_size") is not None:
        bits.append(f"b={e['batch_size']}")
    if mates > 0:
        bits.append(f"mates={mates}")
    if e.get("num_cached_tokens"):
        bits.append(f"c={e['num_cached_tokens']}")
    if e.get("status") not in (None, "ok"):
        bits.append(str(e["status"]))
    return (" " + " ".join(bits)) if bits else ""


def terminal_gantt(trace: Sequence[Mapping[str, Any]]) -> str:
    """`gantt` sized to the terminal (20-80 columns of time beside the names and notes)."""
    import shutil

    columns = shutil.get_terminal_size((120, 24)).columns
    return gantt(trace, width=max(20, min(80, columns - LABEL - 20)))
