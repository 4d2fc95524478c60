"""What the options of the `lamps` policy (teola.scheduling.program.lamps.LAMPSPolicy) accept, checked
when the policy is built; each error names the option and what it takes."""

from __future__ import annotations

from typing import Any


def check_options(
    *,
    starvation: Any,
    refresh: Any,
    step_s: float,
    fwd_s_per_token: float,
    swap_s_per_token: float | None,
    starvation_from: Any,
    preempt: Any,
    preserved_first: Any,
    rerank_every: Any,
    batch_size: Any,
) -> None:
    """LAMPSPolicy's options checked eagerly, each error naming the option and what it takes."""
    if not isinstance(starvation, int) or starvation < 1:
        raise ValueError(f"lamps: starvation must be an int >= 1 (engine iterations), got {starvation!r}")
    if not isinstance(refresh, int) or refresh < 1:
        raise ValueError(
            f"lamps: refresh must be an int >= 1 (rounds between score updates), got {refresh!r}"
        )
    if not step_s > 0 or fwd_s_per_token < 0 or (swap_s_per_token is not None and swap_s_per_token < 0):
        raise ValueError("lamps: step_s must be > 0 and the per-token costs >= 0")
    if starvation_from not in ("scheduled", "seen"):
        raise ValueError(
            f"lamps: starvation_from must be 'scheduled' (LAMPS §4.4) or 'seen', got {starvation_from!r}"
        )
    if not isinstance(preempt, bool) or not isinstance(preserved_first, bool):
        raise ValueError(
            f"lamps: preempt and preserved_first must be true or false, got {preempt!r}, {preserved_first!r}"
        )
    if not isinstance(rerank_every, int) or rerank_every < 1:
        raise ValueError(f"lamps: rerank_every must be an int >= 1 (progress events), got {rerank_every!r}")
    if batch_size not in (None, "measured", "running") and (
        not isinstance(batch_size, int) or batch_size < 1
    ):
        raise ValueError(
            "lamps: batch_size must be an int >= 1 (calls per batch), 'measured', 'running' or None, "
            f"got {batch_size!r}"
        )
