"""KV-cache blocks of a simulated LLM engine, with vLLM's automatic prefix caching.

A sequence's KV lives in fixed-size blocks. A full block is named by a hash chained over the token
ids of every block up to it (so equal hashes mean equal prefixes); full blocks stay resident after
their sequences finish and are reused by later prompts with the same prefix, until memory runs out
and the least recently freed ones are evicted. A sequence's partly filled last block is private.

`BlockPool` counts blocks only (no tensors): resident hashed blocks with their reference counts, an
LRU of the unreferenced ones (evictable), and the private blocks sequences hold. With
`prefix_caching=False` (vLLM's `enable_prefix_caching=False`) no block is ever shared or kept: a
sequence's full blocks get keys of their own and are freed when it releases them.
"""

from __future__ import annotations

import itertools
from collections import OrderedDict
from dataclasses import dataclass, field


def block_hashes(
    ids: list[int], block_size: int, start: int = 0, stop: int | None = None, parent: int = 0
) -> list[int]:
    """Chained hashes of the full blocks `start..stop-1` of `ids` (`parent`: the hash of block
    start-1, 0 for the first block)."""
    out: list[int] = []
    h = parent
    last = len(ids) // block_size if stop is None else stop
    for b in range(start, last):
        # hash() of a tuple of ints is the same in every process (only str/bytes hashing is salted)
        h = hash((h, *ids[b * block_size : (b + 1) * block_size]))
        out.append(h)
    return out


@dataclass(slots=True)
class Holding:
    """The blocks one sequence holds: its hashed full blocks in order and its private ones."""

    hashes: list[int] = field(default_factory=list)
    private: int = 0

    @property
    def blocks(self) -> int:
        return len(self.hashes) + self.private


class BlockPool:
    """`num_blocks` KV blocks of `block_size` tokens (see the module docstring)."""

    def __init__(self, num_blocks: int, block_size: int, prefix_caching: bool = True) -> None:
        if num_blocks < 1 or block_size < 1:
            raise ValueError(f"num_blocks and block_size must be >= 1, got {num_blocks}, {block_size}")
        self.num_blocks = num_blocks
        self.block_size = block_size
        self.prefix_caching = prefix_caching
        self._own = itertools.count(
            -1, -1
        )  # keys of unshared blocks (prefix caching off); hashes never collide
        self.refs: dict[int, int] = {}  # resident hashed block -> sequences holding it
        self.lru: OrderedDict[int, None] = OrderedDict()  # resident blocks nobody holds, oldest first
        self.private = 0
        self.evictions = 0

    @property
    def free(self) -> int:
        """Blocks a sequence can get now (free ones plus evictable cached ones)."""
        return self.num_blocks - len(self.refs) - self.private + len(self.lru)

    def cached_blocks(self, hashes: list[int]) -> int:
        """How many leading blocks of a prompt with these block hashes are resident."""
        n = 0
        for h in hashes:
            if h not in self.refs:
                break
            n += 1
        return n

    def acquire(self, holding: Holding, hashes: list[int]) -> None:
        """Take references on resident blocks (a prefix-cache hit)."""
        for h in hashes:
            assert h in self.refs, "acquire takes resident blocks only"
            if self.refs[h] == 0:
                del self.lru[h]
            self.refs[h] += 1
            holding.hashes.append(h)

    def allocate(self, holding: Holding, n: int) -> bool:
        """Give a sequence `n` more private blocks, evicting cached blocks if needed; False (and
        nothing changed) when even eviction cannot make room."""
        if n <= 0:
            return True
        if self.free < n:
            return False
        while self.num_blocks - len(self.refs) - self.private < n:
            h, _ = self.lru.popitem(last=False)
            del self.refs[h]
            self.evictions += 1
        self.private += n
        holding.private += n
        return True

    def seal(self, holding: Holding, h: int) -> None:
        """One of the sequence's private blocks filled up and got hash `h`: it becomes a cached
        block (or, when an equal block is already resident, the sequence shares that one and its
        private block is freed)."""
        assert holding.private > 0, "seal needs a private block"
        holding.private -= 1
        self.private -= 1
        if not self.prefix_caching:
            h = next(self._own)
        if h in self.refs:
            if self.refs[h] == 0:
                del self.lru[h]
            self.refs[h] += 1
        else:
            self.refs[h] = 1
        holding.hashes.append(h)

    def release(self, holding: Holding) -> None:
        """A sequence finished or was preempted: its hashed blocks stay cached (evictable once no
        one holds them), its private blocks are freed."""
        for h in reversed(holding.hashes):  # a prompt's tail is evicted before its shared head
            self.refs[h] -= 1
            if self.refs[h] == 0:
                if self.prefix_caching:
                    self.lru[h] = None
                else:
                    del self.refs[h]
        self.private -= holding.private
        holding.hashes.clear()
        holding.private = 0

    def drop_cached(self) -> int:
        """Forget every cached block nobody holds (vLLM's reset_prefix_cache); returns how many."""
        n = len(self.lru)
        for h in self.lru:
            del self.refs[h]
        self.lru.clear()
        return n
