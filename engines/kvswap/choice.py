"""Swap or recompute a preempted call's KV: the cost model (pure, no vLLM).

A preempted call's KV either goes to host memory and comes back (swap: bytes over the batched
kernel's bandwidth, plus a fixed cost per copy call) or is dropped and prefilled again on resume
(recompute: tokens times the engine's prefill seconds per token). The engine measures the three
numbers on the machine it runs on (`engines/vllm/kv_swap.py`) and sends them with every call.

    costs = SwapCosts(prefill_s_per_token=3e-3, swap_bytes_per_s=2e9, swap_fixed_s=1e-4)
    choose(tokens=512, nbytes=512 * 23040, costs=costs)                 # "swap"
    choose(tokens=512, nbytes=512 * 23040, costs=costs, moves=2)        # out now + in later
    save_pays(computed=80, block_size=32, block_move_s=1e-3, prefill_token_s=2e-3, survival=1.0)
    # True: the 16-token tail block is never in the prefix cache

`save_pays` decides a save on abort; `SurvivalTracker` estimates the `survival` share it weighs, for
both the real connector and the simulator.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Hashable
from dataclasses import asdict, dataclass
from typing import Any, Literal

Choice = Literal["swap", "recompute"]


@dataclass(frozen=True, slots=True)
class SwapCosts:
    """prefill_s_per_token: seconds the engine takes to prefill one more token;
    swap_bytes_per_s: the swap kernel's bandwidth; swap_fixed_s: its cost per call."""

    prefill_s_per_token: float
    swap_bytes_per_s: float
    swap_fixed_s: float = 0.0

    def __post_init__(self) -> None:
        for name in ("prefill_s_per_token", "swap_bytes_per_s", "swap_fixed_s"):
            value = getattr(self, name)
            if (
                not isinstance(value, (int, float))
                or isinstance(value, bool)
                or not math.isfinite(value)
                or value < 0
                or (value == 0 and name == "swap_bytes_per_s")
            ):
                raise ValueError(
                    f"swap cost {name} must be a finite number >= 0 (> 0 for swap_bytes_per_s), got {value!r}"
                )

    def as_dict(self) -> dict[str, float]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Any) -> SwapCosts:
        """From `as_dict()` output; ValueError naming the problem otherwise."""
        if not isinstance(d, dict):
            raise ValueError(
                f"swap costs must be a dict of prefill_s_per_token, swap_bytes_per_s, "
                f"swap_fixed_s, got {d!r:.80}"
            )
        try:
            return cls(
                float(d["prefill_s_per_token"]),
                float(d["swap_bytes_per_s"]),
                float(d.get("swap_fixed_s", 0.0)),
            )
        except KeyError as e:
            raise ValueError(f"swap costs lack {e.args[0]!r}") from None


def recompute_seconds(tokens: int, costs: SwapCosts) -> float:
    """Seconds to prefill `tokens` again."""
    return tokens * costs.prefill_s_per_token


def swap_seconds(nbytes: int, costs: SwapCosts, moves: int = 1) -> float:
    """Seconds to move `nbytes` `moves` times (1: swap-in only; 2: out now and in later)."""
    return moves * (costs.swap_fixed_s + nbytes / costs.swap_bytes_per_s)


def choose(tokens: int, nbytes: int, costs: SwapCosts, moves: int = 1) -> Choice:
    """ "swap" when moving `nbytes` (`moves` times) is strictly cheaper than prefilling `tokens`
    again, else "recompute" (also when there is nothing to move)."""
    if tokens < 0 or nbytes < 0 or moves < 1:
        raise ValueError(f"tokens and nbytes must be >= 0 and moves >= 1, got {tokens}, {nbytes}, {moves}")
    if tokens == 0 or nbytes == 0:
        return "recompute"
    return "swap" if swap_seconds(nbytes, costs, moves) < recompute_seconds(tokens, costs) else "recompute"


def save_pays(
    computed: int,
    block_size: int,
    block_move_s: float,
    prefill_token_s: float,
    survival: float = 0.0,
    fixed_s: float = 0.0,
) -> bool:
    """Whether saving an aborted call's KV is expected to pay. All ceil(computed / block_size) of its
    blocks go out now. On resume the prefix cache still holds a share `survival` of its full blocks,
    but never the last, partly filled one (it caches full blocks only): what it lost is loaded back
    instead of prefilled again. With full, tail = divmod(computed, block_size):
        lost blocks = (1 - survival) * full + (1 if tail else 0)
        lost tokens = (1 - survival) * full * block_size + tail
        2 * fixed_s + (blocks + lost blocks) * block_move_s < lost tokens * prefill_token_s
    With survival 0 that is the plain round trip against recomputing everything (`choose`, moves=2)."""
    if computed < 0 or block_size < 1 or block_move_s < 0 or prefill_token_s < 0 or fixed_s < 0:
        raise ValueError(
            f"bad save inputs: computed {computed}, block_size {block_size}, block_move_s "
            f"{block_move_s}, prefill_token_s {prefill_token_s}, fixed_s {fixed_s}"
        )
    if not 0.0 <= survival <= 1.0:
        raise ValueError(f"survival must be a share in [0, 1], got {survival!r}")
    full, tail = divmod(computed, block_size)
    lost_blocks = (1.0 - survival) * full + (tail > 0)
    lost_tokens = (1.0 - survival) * full * block_size + tail
    if lost_tokens <= 0:
        return False
    return 2 * fixed_s + (full + (tail > 0) + lost_blocks) * block_move_s < lost_tokens * prefill_token_s


class SurvivalTracker:
    """The share of an aborted call's full blocks the prefix cache still held when the call resumed,
    over the resumes seen so far: `save_pays`'s `survival`. `watch` an aborted call (saved or
    not) by key; its first `resumed` after that counts. At most `limit` calls are watched at once
    (the oldest are forgotten: a call that never resumes must not pin memory)."""

    def __init__(self, limit: int = 4096) -> None:
        if limit < 1:
            raise ValueError(f"survival tracker limit must be >= 1, got {limit!r}")
        self.limit = limit
        self.blocks = 0  # full blocks of the resumed calls
        self.cached = 0  # ... of which the prefix cache still held
        self._watch: OrderedDict[Hashable, int] = OrderedDict()

    def watch(self, key: Hashable, blocks: int) -> None:
        """An aborted call with `blocks` full computed blocks (0: nothing to watch)."""
        self._watch.pop(key, None)
        if blocks > 0:
            self._watch[key] = blocks
            while len(self._watch) > self.limit:
                self._watch.popitem(last=False)

    def resumed(self, key: Hashable, cached: int) -> tuple[int, int]:
        """A call was admitted with `cached` full blocks from the prefix cache. If it is a watched
        call's first admission since its abort: count it and return (its blocks, those cached);
        else (0, 0)."""
        blocks = self._watch.pop(key, 0)
        return self.count(blocks, cached) if blocks else (0, 0)

    def count(self, blocks: int, cached: int) -> tuple[int, int]:
        """A resume known without a watch (a swapped call found by its own key): count `cached` of
        its `blocks` full blocks as kept; returns them (cached capped at blocks)."""
        cached = max(0, min(cached, blocks))
        self.blocks += blocks
        self.cached += cached
        return blocks, cached

    @property
    def watching(self) -> bool:
        """Whether any aborted call is watched (callers can skip hashing a request's tokens if not)."""
        return bool(self._watch)

    def share(self) -> float:
        """cached / blocks over the resumes so far (0 before the first)."""
        return self.cached / self.blocks if self.blocks else 0.0
