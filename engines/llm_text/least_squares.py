"""Non-negative least squares, the one fitting method of teola's cost models: `teola profile`'s fits
(teola.sim.fit) and the short probe an LLM engine runs at start (engines.llm_text.cost_probe)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import scipy.optimize


def nnls(rows: Sequence[Sequence[float]], y: Sequence[float], relative: bool = False) -> list[float]:
    """Least squares with coefficients >= 0 (scipy.optimize.nnls: the constrained optimum, not an
    unconstrained fit with negative terms dropped).
    relative: minimise relative rather than absolute errors (each row weighted by 1 / y), so a
    few long measurements do not outweigh many short ones."""
    a, b = np.asarray(rows, dtype=float), np.asarray(y, dtype=float)
    if a.ndim != 2 or a.shape[0] != b.shape[0]:
        raise ValueError(
            f"nnls needs one row of features per measurement: got {a.shape[0] if a.ndim else 0} "
            f"rows and {b.shape[0]} measurements"
        )
    if relative:
        w = 1.0 / np.maximum(b, 1e-12)
        a, b = a * w[:, None], b * w
    coef, _ = scipy.optimize.nnls(a, b)
    return [float(c) for c in coef]
