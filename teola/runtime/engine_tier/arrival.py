"""What an LLM engine's entry gets when it arrives at its engine scheduler: what each of its requests
is charged against the token budget, and the hints written into its dispatch records (predicted
output lengths, then the handling of a pausing call's pause)."""

from __future__ import annotations

from typing import Any

from engines.requests import DECODE_OPS
from teola.runtime.engine_tier.token_estimates import estimate_held_tokens, estimate_tokens
from teola.scheduling.base import Pending, Policy
from teola.scheduling.program.length_predictions import predicted_lengths
from teola.scheduling.program.pause_handling import PauseBook


def charges(entry: Pending, *, live: bool) -> list[int]:
    """What each request of an LLM entry is charged against the token budget: what it holds when
    admitted (prompt + headroom, growing as it decodes) for a preemptible call under live admission
    (`live`: the engine's preemptor admits by what calls hold; teola.scheduling.preemption.held_tokens),
    else its prompt + whole output budget."""
    if live and entry.op in DECODE_OPS:
        return [estimate_held_tokens(entry.wire(i)) for i in range(len(entry.requests))]
    return [estimate_tokens(r) for r in entry.requests]


def write_hints(
    entry: Pending, pauses: PauseBook, policy: Policy, length_predictor: Any, engine: str
) -> None:
    """The length predictions first ("auto" handlings are chosen from them, as LAMPS ranks by
    them), then the pause book's handlings, written into the entry's records. `length_predictor`:
    the Runtime option of that name; `engine` names the engine in its errors."""
    wires = [entry.wire(i) for i in range(len(entry.requests))]
    for rec, n in zip(entry.records, predicted_lengths(length_predictor, wires, engine)):
        if n is not None:
            rec.predicted_tokens = n
    for rec, hint in zip(entry.records, pauses.prepare(entry, policy)):
        rec.pause_kv, rec.resumes_preserved = hint.pause_kv, hint.resumes_preserved
