"""Shortest job first by predicted length (LAMPS §5's baseline): waiting LLM calls ranked by the
tokens they are predicted to decode, before and after their API call (the dispatch record's
`predicted_tokens`, else its max_tokens, plus "post_tokens"), blind to API durations and to what
their KV does during the API call. Admission control like `lamps` (no preemption of running calls)."""

from __future__ import annotations

from teola.scheduling.base import Pending, RankedAdmission


def predicted_length(e: Pending) -> int:
    """Tokens `e`'s next call is predicted to decode: its record's `predicted_tokens`, else its
    max_tokens, plus its "post_tokens"."""
    i = e.head
    req = e.requests[i]
    return int(e.records[i].predicted_tokens or e.budget(i) or 1) + int(req.get("post_tokens") or 0)


class SJFPolicy(RankedAdmission):
    name = "sjf"

    def rank(self, e: Pending) -> tuple[int, float]:
        return predicted_length(e), e.arrival
