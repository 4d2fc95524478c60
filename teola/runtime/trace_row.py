"""`TraceRow`: one row of a query's trace (`Result.trace`), one per primitive, as the graph tier
builds it. Its kind is a `TraceStatus`; its op is the primitive's `PrimOp` value (a plain string, so
a row serializes and formats as it always has; it compares equal to the `PrimOp` member)."""

from __future__ import annotations

from typing import NotRequired, TypedDict

from teola.ir.primitive import Primitive
from teola.runtime.trace_status import TraceStatus

# the engine's result fields an LLM primitive's row copies (`llm_extras`)
LLM_EXTRAS = ("num_prompt_tokens", "num_cached_tokens", "num_output_tokens", "finish_reason")


class TraceRow(TypedDict):
    """queued / started / finished: seconds since the query started (None until then); instance,
    batch_id, batch_size: the engine batch that first ran it; batches: how many batches it took
    (more than one when preempted and resumed); requests: engine requests it sent. The rest only
    where they apply: split (a decode whose output is a list of items), the LLM extras, fused_into /
    fused_with (a prefill fused into its decode, and that decode), dropped_items (streamed items past
    the ones its members took), pause_kv (the handling a pausing segment's pause got), dropped (why a
    warm-up was skipped)."""

    primitive: str
    op: str
    engine: str | None
    depth: int
    status: TraceStatus
    queued: float
    started: float | None
    finished: float | None
    instance: str | None
    batch_id: str | None
    batch_size: int | None
    batches: int
    requests: int
    split: NotRequired[bool]
    num_prompt_tokens: NotRequired[int | None]
    num_cached_tokens: NotRequired[int | None]
    num_output_tokens: NotRequired[int | None]
    finish_reason: NotRequired[str | None]
    fused_into: NotRequired[str]
    fused_with: NotRequired[str]
    dropped_items: NotRequired[int]
    pause_kv: NotRequired[str]
    dropped: NotRequired[str]


def new_row(p: Primitive, status: TraceStatus, t: float, n: int = 0) -> TraceRow:
    """The row of primitive `p` as it is queued (or done at once) at `t`, with `n` requests."""
    row = TraceRow(
        primitive=p.name,
        op=p.op.value,
        engine=p.engine,
        depth=p.depth,
        status=status,
        queued=t,
        started=None,
        finished=None,
        instance=None,
        batch_id=None,
        batch_size=None,
        batches=0,
        requests=n,
    )
    if p.args.get(
        "split"
    ):  # the decode returns a list of items (an output-length kind of its own for the simulator)
        row["split"] = True
    return row


def llm_extras(row: TraceRow, result: dict[str, object]) -> None:
    """Copy the LLM extras an engine's result holds into `row`."""
    for key in LLM_EXTRAS:
        if key in result:
            row[key] = result[key]  # type: ignore[literal-required]
