"""`KVRoom`: what an LLM engine instance can still admit, in its KV cache's tokens, when a
preemptive policy chooses victims (Autellix Alg. 1's `engine.can_fit`; the rule that fills it is
teola.scheduling.preemption.kv_room)."""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import dataclass


@dataclass(frozen=True, slots=True, kw_only=True)
class KVRoom:
    """seats: requests the instance may still admit (max_num_seqs less those running); tokens: its
    token budget less what the running calls hold now (negative: they overflow it as they decode);
    held: each running entry's tokens now (its requests' prompt + tokens decoded so far + headroom);
    need: each waiting entry's tokens if admitted now (prompt + resumed ids + headroom)."""

    seats: int
    tokens: int
    held: Mapping[Hashable, int]
    need: Mapping[Hashable, int]
