"""The one table writer of the study pages and its formatting helpers: a results table (a header, an
alignment, rows of cells) becomes markdown lines; numbers, percentages, ratios and confidence intervals
are written the same way on every page, and a page states its machine with one sentence."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

NONE = "-"  # what a cell shows for a missing value (None or NaN)


def missing(x: Any) -> bool:
    """True for None and NaN: a value a table shows as NONE."""
    return x is None or (isinstance(x, float) and math.isnan(x))


def num(x: float | None, digits: int = 1, sep: str = "") -> str:
    """`x` with `digits` decimals (`sep` ",": thousands separated); NONE when missing."""
    return NONE if missing(x) else f"{x:{sep}.{digits}f}"


def fixed(x: float | None, digits: int = 2) -> str:
    """`x` with `digits` decimals, "n/a" when missing: the cells of the RAG studies' pages."""
    return "n/a" if missing(x) else f"{x:.{digits}f}"


def pct(x: float | None, digits: int = 0) -> str:
    """A fraction as a percentage: 0.25 -> "25%"; NONE when missing."""
    return NONE if missing(x) else f"{100 * x:.{digits}f}%"


def ratio(top: float | None, bottom: float | None, digits: int = 2) -> str:
    """top / bottom as "1.23x"; NONE when either is missing or the bottom is zero."""
    return NONE if missing(top) or missing(bottom) or not bottom else f"{top / bottom:.{digits}f}x"


def ci(mid: float, lo: float, hi: float, digits: int = 2) -> str:
    """An estimate with its confidence interval: "1.02 [0.95, 1.10]"."""
    return f"{mid:.{digits}f} [{lo:.{digits}f}, {hi:.{digits}f}]"


def machine_facts(m: dict[str, Any]) -> str:
    """The sentence a page states its machine with, from bench.lib.results.machine()'s record (what a
    page's JSON holds under "machine"): "Machine: CPU, N cores; commit C."."""
    return f"Machine: {m.get('cpu', '?')}, {m.get('cores', '?')} cores; commit {m.get('commit', '?')}."


def rule(align: str) -> str:
    """The markdown rule under a header: one "---" per column, "---:" where `align` has "r"."""
    return "|" + "".join("---:|" if a == "r" else "---|" for a in align)


def table(header: Sequence[str], rows: Iterable[Sequence[Any]], align: str | None = None) -> list[str]:
    """A markdown table as lines: the header, its rule (`align`: one letter per column, "l" or "r";
    default every column "l") and one line per row, each cell written with str()."""
    lines = [line(header), rule(align or "l" * len(header))]
    return lines + [line(row) for row in rows]


def line(cells: Sequence[Any]) -> str:
    """One table line: "| a | b |", an empty cell as "| |"."""
    return "|" + "".join(f" {c} |" if str(c) else " |" for c in cells)
