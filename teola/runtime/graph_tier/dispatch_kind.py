"""`DispatchKind`: what one dispatch of a query to an engine scheduler runs (`DispatchWork.kind`)."""

from __future__ import annotations

import enum


class DispatchKind(enum.StrEnum):
    """PRIM: one primitive; FUSED: a prefill fused with its only decode; STREAM: a group of Partial
    Decoding items served by one streaming request (optionally fused with the prefill before it)."""

    PRIM = "prim"
    FUSED = "fused"
    STREAM = "stream"
