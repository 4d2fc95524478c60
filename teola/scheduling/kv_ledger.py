"""`KVLedger`: one LLM engine instance's KV cache as preemptive admission counts it, on the engine's
own numbers once the engine reports them (engines.stream_events.KVReport, StreamEvent.KV).

The rule (Autellix Alg. 1's `engine.can_fit` on what the engine knows):
- a running request is charged `held_tokens(prompt, decoded, block)`: its prompt as the engine
  tokenized it once the engine has reported it (before that, teola's estimate, 4 characters a token),
  the tokens it decoded in this run, and one engine block of headroom (KV_HEADROOM, 16, until the
  engine reports its block size);
- where the engine reports its used blocks, the instance is charged those (a prefix shared through
  the prefix cache counts once, as the engine holds it) plus what teola charges the requests the
  engine has not reported yet (admitted since, or still waiting inside the engine), plus what the
  reported requests decoded since the report; a reported request that leaves (ends or is preempted)
  stays counted until the engine's next report says what it freed (a prefix it shared stays in the
  engine: counting its whole charge as freed would admit calls into room that is not there, then
  shed them at the next report). Without used blocks, the instance is charged the sum over its
  requests, and a request that leaves takes its charge with it.

The ledger keeps `adjust`, what the instance's count carries beyond the sum of its requests' charges
(the engine's used tokens at the last report less the reported requests' charges then); the
Preemptor adds the deltas it returns to the instance's token count.
"""

from __future__ import annotations

from dataclasses import dataclass

from teola.scheduling.preemption import KV_HEADROOM, held_tokens


@dataclass(slots=True)
class KVLedger:
    """block: the engine's KV block size (KV_HEADROOM until reported); reported: the charges of the
    running requests the engine has reported; adjust: see the module docstring."""

    block: int = KV_HEADROOM
    reported: int = 0
    adjust: int = 0
    rebased: bool = False  # the engine reports its used blocks

    def headroom_change(self) -> int:
        """What one request's charge changes by once the engine's block replaces KV_HEADROOM."""
        return self.block - KV_HEADROOM

    def first_report(self, charged: int, prompt: int, decoded: int, block: int) -> int:
        """A running request charged `charged` (teola's estimate) is reported for the first time: the
        engine's `prompt` tokens and `block` size, having decoded `decoded` tokens in this run.
        Returns its charge on the engine's numbers; the caller adds (that - charged) to the count."""
        self.block = block if block > 0 else self.block
        held = held_tokens(prompt, decoded, self.block)
        self.reported += held
        return held

    def grew(self, tokens: int) -> None:
        """A reported request decoded `tokens` more."""
        self.reported += tokens

    def left(self, tokens: int) -> int:
        """Reported requests charged `tokens` in all stopped running (the caller took their charges
        off the count). Returns the change to the count: with used blocks reported, `tokens` back
        (they stay counted until the next report), else 0."""
        self.reported -= tokens
        if not self.rebased:
            return 0
        self.adjust += tokens
        return tokens

    def rebase(self, used_blocks: int) -> int:
        """The engine reports `used_blocks` in use: the instance's count becomes those blocks' tokens
        plus the charges of the requests it has not reported. Returns the change to the count."""
        adjust = used_blocks * self.block - self.reported
        delta, self.adjust, self.rebased = adjust - self.adjust, adjust, True
        return delta

    def emptied(self) -> int:
        """No request runs on the instance any more: the count is the sum of charges again (none).
        Returns the change to the count."""
        delta, self.adjust, self.reported = -self.adjust, 0, 0
        return delta
