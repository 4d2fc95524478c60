"""Shortest job first by predicted length (LAMPS §5's baseline): waiting LLM calls ranked by the
tokens they are predicted to decode, before and after their API call (the request's
"predicted_tokens", else its max_tokens, plus "post_tokens"), blind to API durations and to what
their KV does during the API call. Admission control like `lamps` (no preemption of running calls)."""
from __future__ import annotations

from teola.scheduling.base import Pending, RankedAdmission


def predicted_length(e: Pending) -> int:
    req = e.requests[e.taken] if e.taken < len(e.requests) else e.requests[-1]
    return int(req.get("predicted_tokens") or req.get("max_tokens") or 1) + int(req.get("post_tokens") or 0)


class SJFPolicy(RankedAdmission):
    name = "sjf"

    def rank(self, e: Pending) -> tuple[int, float]:
        return predicted_length(e), e.arrival
