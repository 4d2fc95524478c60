"""`TraceStatus`: the status of one row of a query's trace (`Result.trace`), as the graph tier
writes it. A `StrEnum`: a row's status still compares equal to, and serializes as, its string."""

from __future__ import annotations

import enum


class TraceStatus(enum.StrEnum):
    """QUEUED: dispatched to its engine, not finished; OK: finished (or done at once); SKIPPED: behind
    a condition that said no (or a warm-up whose call was ready first); DISCARDED: a speculative
    call its condition made useless; DROPPED: its query ended before an engine took it; ABANDONED:
    its query ended while an engine ran it."""

    QUEUED = "queued"
    OK = "ok"
    SKIPPED = "skipped"
    DISCARDED = "discarded"
    DROPPED = "dropped"
    ABANDONED = "abandoned"
