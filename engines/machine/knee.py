"""An engine's maximum efficient batch from its measured latency curve (Teola §5.1: past this batch
size throughput stops growing, so stage decomposition splits larger primitives into batches of it
and topology-aware batching fills batches up to it)."""

from __future__ import annotations

from collections.abc import Mapping


def knee(curve: Mapping[int, float], tolerance: float = 0.1) -> int:
    """The smallest batch size whose throughput (batch / seconds) is within `tolerance` of the best
    throughput on the curve {batch size: seconds per batch}."""
    points = {int(b): float(s) for b, s in curve.items() if int(b) > 0 and float(s) > 0}
    if not points:
        raise ValueError(
            f"knee: the latency curve needs batch sizes > 0 with seconds > 0, got {dict(curve)!r}"
        )
    if not 0 <= tolerance < 1:
        raise ValueError(f"knee: tolerance must be in [0, 1), got {tolerance!r}")
    best = max(b / s for b, s in points.items())
    return min(b for b, s in points.items() if b / s >= (1 - tolerance) * best)
