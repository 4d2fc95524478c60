"""What teola's KV connector holds in host memory, as the scheduler sees it (pure, no vLLM).

The scheduler side of `engines/vllm/kv_connector.py` is the source of truth: it decides which
aborted calls are saved (by cost, `engines/kvswap/choice.py`), which entries the host-memory bound
drops (least recently saved first), and which resumed calls load how many blocks; each step it hands
the worker a `SwapJobs` list to carry out in order (drops, saves, loads). The worker only executes,
so the two sides may live in different processes: nothing is shared but the per-step jobs.

Entries are keyed by the call's swap key (teola's preemptor gives each call one that survives its
resumes) and hold every block with computed tokens, the last one partly filled: a resume (prompt +
decoded ids) then loads all but its last token, which is computed as a decode step would (a
recomputed tail goes through prefill kernels, whose rounding may flip a greedy near-tie). The
tokens an entry covers are checked against the resumed prompt.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field

from engines.kvswap.choice import SurvivalTracker, SwapCosts, choose, save_pays


@dataclass(slots=True)
class SwapJobs:
    """One step's work for the worker: drop host entries, save blocks (then report `releases` as
    finished sending so vLLM frees the blocks), load entries into new blocks past `skip` blocks."""

    drops: list[str] = field(default_factory=list)
    saves: list[tuple[str, list[int]]] = field(default_factory=list)
    releases: list[str] = field(default_factory=list)
    loads: list[tuple[str, list[int], int]] = field(default_factory=list)
    counters: dict[str, int] = field(default_factory=dict)

    def empty(self) -> bool:
        return not (self.drops or self.saves or self.releases or self.loads)


@dataclass(slots=True)
class _Entry:
    tokens: list[int]
    blocks: int
    saved: bool = False  # False: its save is still queued in the jobs not handed out yet


COUNTERS = (
    "saves",
    "saved_tokens",
    "saves_declined",
    "saves_too_big",
    "saves_cancelled",
    "lru_drops",
    "loads",
    "loaded_tokens",
    "unused",
    "resumed_blocks",
    "resumed_cached_blocks",
)
WATCHED = 4096  # aborted calls whose resume is watched for what the prefix cache kept (oldest forgotten)


class SwapIndex:
    """Host entries by swap key, bounded to `capacity_bytes` (blocks x `record_bytes`)."""

    def __init__(self, block_size: int, record_bytes: int, capacity_bytes: int) -> None:
        if block_size < 1 or record_bytes < 1 or capacity_bytes < 0:
            raise ValueError(
                f"bad swap index geometry: block_size {block_size}, record_bytes {record_bytes}, "
                f"capacity_bytes {capacity_bytes}"
            )
        self.block_size = block_size
        self.record_bytes = record_bytes
        self.capacity_bytes = capacity_bytes
        self.entries: OrderedDict[str, _Entry] = OrderedDict()
        self.counters = dict.fromkeys(COUNTERS, 0)
        self._jobs = SwapJobs()
        self._survival = SurvivalTracker(WATCHED)
        self._cancelled: OrderedDict[str, None] = OrderedDict()  # keys whose coming abort saves nothing

    def survival(self) -> float:
        """The share of full blocks that calls resumed so far found still in the prefix cache (0
        before the first resume): what a save neither loads nor recomputes later."""
        return self._survival.share()

    @property
    def used_bytes(self) -> int:
        return sum(e.blocks for e in self.entries.values()) * self.record_bytes

    def save(
        self,
        key: str,
        req_id: str,
        token_ids: Sequence[int],
        block_ids: Sequence[int],
        computed: int,
        costs: SwapCosts,
    ) -> bool:
        """An aborted call: save the blocks of its `computed` tokens if the round trip through host
        memory is expected to cost less than prefilling again what the prefix cache will have lost
        (`save_pays`: a share `survival` of the full blocks is kept, never the partly filled last
        one), and they fit, unless the call was cancelled (`forget`). True: the worker will save them
        and release `req_id`'s blocks afterwards (the caller keeps them until then)."""
        self._drop(key)
        if self.cancelled(key):
            self.counters["saves_cancelled"] += 1
            return False
        blocks = min(-(-computed // self.block_size), len(block_ids))
        computed = min(computed, blocks * self.block_size)
        nbytes = blocks * self.record_bytes
        self._survival.watch(key, computed // self.block_size)
        if not save_pays(
            computed,
            self.block_size,
            self.record_bytes / costs.swap_bytes_per_s,
            costs.prefill_s_per_token,
            self.survival(),
            costs.swap_fixed_s,
        ):
            self.counters["saves_declined"] += blocks > 0
            return False
        if nbytes > self.capacity_bytes:
            self.counters["saves_too_big"] += 1
            return False
        while self.used_bytes + nbytes > self.capacity_bytes:
            self._drop(next(iter(self.entries)), lru=True)
        self.entries[key] = _Entry(list(token_ids[:computed]), blocks)
        self._jobs.saves.append((key, list(block_ids[:blocks])))
        self._jobs.releases.append(req_id)
        self.counters["saves"] += 1
        self.counters["saved_tokens"] += computed
        return True

    def forget(self, keys: Sequence[str], running: bool) -> None:
        """The calls of `keys` were cancelled by their clients and never resume: drop what is saved
        for them (a save not handed out yet is withdrawn); with `running`, each one's abort still
        to come saves nothing (`save` consults `cancelled`)."""
        for key in keys:
            self._drop(key)
            if running:
                self._cancelled[key] = None
                self._cancelled.move_to_end(key)
                while len(self._cancelled) > WATCHED:
                    self._cancelled.popitem(last=False)

    def cancelled(self, key: str) -> bool:
        """Whether `key` was cancelled while it ran (consumed: asked once, when its request ends)."""
        return self._cancelled.pop(key, 0) is None

    def matched(self, key: str, token_ids: Sequence[int], local: int, costs: SwapCosts) -> int:
        """Tokens past `local` (block-aligned tokens the prefix cache holds) a resumed call can load:
        its entry's tokens when they match, at least one token left to compute, the load running to
        the entry's last block, and only when loading them is cheaper than prefilling them. No side
        effects."""
        entry = self.entries.get(key)
        if entry is None:
            return 0
        usable = min(len(entry.tokens), len(token_ids) - 1)
        if -(-usable // self.block_size) != entry.blocks or list(token_ids[:usable]) != entry.tokens[:usable]:
            return 0
        extra = usable - local
        if (
            extra <= 0
            or choose(extra, (entry.blocks - local // self.block_size) * self.record_bytes, costs) != "swap"
        ):
            return 0
        return extra

    def consume(self, key: str, block_ids: Sequence[int], local: int, loaded: int) -> None:
        """A resumed call was admitted with `loaded` tokens from its entry after `local` cached ones
        (`block_ids`: all its blocks): queue the load, or the drop when nothing is loaded. The first
        admission after a save (or a declined one) also counts how many of the call's full blocks
        the prefix cache still held (`survival`)."""
        full, cached = self._survival.resumed(key, local // self.block_size)
        self.counters["resumed_blocks"] += full
        self.counters["resumed_cached_blocks"] += cached
        entry = self.entries.pop(key, None)
        if entry is None:
            return
        if loaded <= 0:
            self.counters["unused"] += 1  # cheaper to recompute, tokens differ, or the prefix cache had it
            self._forget(key, entry)
            return
        first, n = (
            local // self.block_size,
            -(-(local + loaded) // self.block_size) - local // self.block_size,
        )
        self._jobs.loads.append((key, list(block_ids[first : first + n]), first))
        self.counters["loads"] += 1
        self.counters["loaded_tokens"] += loaded

    def take_jobs(self) -> SwapJobs:
        """This step's jobs (the entries they save count as saved from now on)."""
        jobs, self._jobs = self._jobs, SwapJobs()
        for key, _ in jobs.saves:
            if key in self.entries:
                self.entries[key].saved = True
        jobs.counters = dict(self.counters, host_bytes=self.used_bytes, entries=len(self.entries))
        return jobs

    def _drop(self, key: str, lru: bool = False) -> None:
        entry = self.entries.pop(key, None)
        if entry is not None:
            self.counters["lru_drops"] += lru
            self._forget(key, entry)

    def _forget(self, key: str, entry: _Entry) -> None:
        if entry.saved:
            self._jobs.drops.append(key)
        else:  # its save was not handed out yet: cancel it (its request is still released)
            self._jobs.saves = [(k, ids) for k, ids in self._jobs.saves if k != key]
