"""The cost of one iteration of a simulated LLM engine (engines/sim_llm.py), in seconds: a linear
model in the iteration's work, the form SamuLLM uses, plus the attention work of prefill chunks.
`teola profile` fits its coefficients to a real engine (teola/sim/fit.py)."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class IterationCost:
    """Seconds of one engine iteration (see the module docstring)."""

    base: float = 0.0
    prefill_token: float = 0.0
    decode_seq: float = 0.0
    context_token: float = 0.0
    prefill_attention: float = 0.0  # per (prefilled token x context token it attends to), over 1,000

    def seconds(self, prefill_tokens: int, decode_seqs: int, context_tokens: int, prefill_pairs: float = 0.0) -> float:
        return (self.base + self.prefill_token * prefill_tokens + self.decode_seq * decode_seqs
                + self.context_token * context_tokens + self.prefill_attention * prefill_pairs / 1000.0)
