"""KV blocks of the simulated LLM (engines.sim.kv): prefix hits by chained block hashes, sharing of
equal blocks, LRU eviction of unreferenced cached blocks, no over-allocation."""

from __future__ import annotations

from engines.sim.kv import BlockPool, Holding, block_hashes


def fill(pool: BlockPool, ids: list[int]) -> Holding:
    """A sequence that computed all of ids: private blocks, full ones sealed by hash."""
    held = Holding()
    assert pool.allocate(held, -(-len(ids) // pool.block_size))
    for h in block_hashes(ids, pool.block_size):
        pool.seal(held, h)
    return held


def test_chained_hashes_name_prefixes():
    a = block_hashes(list(range(40)), 16)
    b = block_hashes(list(range(32)) + [99] * 8, 16)
    c = block_hashes([5] + list(range(1, 40)), 16)
    assert len(a) == 2 and a == b  # the third block is partial: not hashed
    assert c[0] != a[0] and c[1] != a[1]  # a different first block changes every later hash


def test_a_finished_prompt_is_a_prefix_hit_for_the_next():
    pool = BlockPool(num_blocks=10, block_size=4)
    first = fill(pool, list(range(10)))  # 2 full blocks + 1 private
    assert pool.free == 7
    pool.release(first)
    assert pool.free == 10  # cached blocks are evictable, so they count as free
    hashes = block_hashes(list(range(9)) + [77, 78, 79], 4)
    assert pool.cached_blocks(hashes) == 2  # blocks 0-1 equal; block 2 differs
    held = Holding()
    pool.acquire(held, hashes[:2])
    assert pool.free == 8 and pool.refs[hashes[0]] == 1


def test_eviction_takes_the_least_recently_freed_unreferenced_blocks():
    pool = BlockPool(num_blocks=4, block_size=2)
    a = fill(pool, [1, 2, 3, 4])
    b = fill(pool, [5, 6, 7, 8])
    pool.release(a)
    pool.release(b)
    held = Holding()
    assert pool.allocate(held, 3)  # nothing free: evicts 3 cached blocks, a's first, each prompt's tail first
    assert pool.evictions == 3
    assert pool.cached_blocks(block_hashes([1, 2, 3, 4], 2)) == 0
    assert pool.cached_blocks(block_hashes([5, 6, 7, 8], 2)) == 1  # b's head block survived
    assert not pool.allocate(held, 5)  # more than the pool holds: refused, nothing changed
    assert held.private == 3


def test_equal_blocks_are_shared_not_duplicated():
    pool = BlockPool(num_blocks=8, block_size=2)
    a = fill(pool, [1, 2, 3, 4])
    b = fill(pool, [1, 2, 3, 4])  # computed concurrently: sealing finds the blocks resident
    assert len(pool.refs) == 2 and pool.private == 0 and pool.free == 6
    pool.release(a)
    assert pool.free == 6  # b still holds them
    pool.release(b)
    assert pool.free == 8 and len(pool.lru) == 2


def test_without_prefix_caching_nothing_is_shared_or_kept():
    pool = BlockPool(num_blocks=8, block_size=2, prefix_caching=False)
    a = fill(pool, [1, 2, 3, 4])
    b = fill(pool, [1, 2, 3, 4])  # equal blocks, computed concurrently: each sequence keeps its own
    assert len(pool.refs) == 4 and pool.free == 4
    assert pool.cached_blocks(block_hashes([1, 2, 3, 4], 2)) == 0  # no prefix hit, even while resident
    pool.release(a)
    pool.release(b)
    assert pool.free == 8 and not pool.refs and not pool.lru  # freed at once, nothing left to evict
    assert pool.evictions == 0
