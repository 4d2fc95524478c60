"""A query's trace as a text table (what `teola run` and `teola query` print)."""

from __future__ import annotations

from typing import Any


def timing_table(trace: list[dict[str, Any]]) -> str:
    """A per-primitive timing table (ms since the query started) from a query's trace."""
    headers = ["op", "component", "engine", "queued", "started", "finished", "run ms", "batch", "cached tok"]
    rows = []

    def ms(v: Any) -> str:
        return f"{1000 * v:.1f}" if isinstance(v, (int, float)) else "-"

    for t in sorted(trace, key=lambda t: (t.get("queued") or 0, t.get("started") or 0)):
        started, finished = t.get("started"), t.get("finished")
        run = (
            finished - started
            if isinstance(started, (int, float)) and isinstance(finished, (int, float))
            else None
        )
        note = " (fused)" if t.get("fused_into") else ""
        rows.append(
            [
                str(t.get("op", "?")) + note,
                str(t.get("primitive", "?")).split(".")[0],
                str(t.get("engine") or "-"),
                ms(t.get("queued")),
                ms(started),
                ms(finished),
                ms(run),
                str(t.get("batch_size") if t.get("batch_size") is not None else "-"),
                str(t.get("num_cached_tokens") if t.get("num_cached_tokens") is not None else "-"),
            ]
        )
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    right = {3, 4, 5, 6, 7, 8}

    def line(cells: list[str]) -> str:
        return "  ".join(
            c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(cells, widths))
        ).rstrip()

    out = [line(headers), line(["-" * w for w in widths])]
    out += [line(r) for r in rows]
    return "\n".join(out)
