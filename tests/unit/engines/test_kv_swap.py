"""KV swap: swap-out then swap-in restores blocks bit-exactly, leaves other blocks alone, and rejects
bad input before touching memory. Every property runs on the native kernel and on the per-block
fallback; the native tests fail (not skip) when the extension is not built."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engines.kvswap._native import load_kvswap
from engines.kvswap._native.kv_fallback import gather_blocks
from engines.kvswap._native.kv_layout import describe_layers
from engines.kvswap.swap import KVSwapManager

ROOT = Path(__file__).resolve().parents[3]
BACKENDS = ["native", "fallback"]
ENV = {**os.environ, "PYTHON": sys.executable}  # make test runs without .venv/bin on PATH
BITS = {torch.bfloat16: torch.int16, torch.float16: torch.int16, torch.float32: torch.int32}


@dataclass
class Cache:
    """One layer: `view` is what the engine hands over, `base` its storage in allocation order."""

    base: torch.Tensor
    view: torch.Tensor

    def bits(self) -> torch.Tensor:
        return self.base.view(BITS[self.base.dtype]).clone()


def make_caches(
    layout: str,
    dtype: torch.dtype,
    layers: int,
    num_blocks: int,
    heads: int,
    block_size: int,
    head_dim: int,
    seed: int = 0,
) -> list[Cache]:
    """Layer caches filled with random bits (NaN/inf patterns included) in one of three layouts."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(layers):
        if layout == "vllm":  # vLLM 0.32: [num_blocks, num_kv_heads, block_size, 2 * head_size]
            shape, block_dim_view = (num_blocks, heads, block_size, 2 * head_dim), None
        elif layout == "legacy":  # [2, num_blocks, block_size, num_kv_heads, head_size]
            shape, block_dim_view = (2, num_blocks, block_size, heads, head_dim), None
        else:  # "permuted": NHD view over HND storage, as a stride-order permutation gives
            shape, block_dim_view = (num_blocks, heads, block_size, 2 * head_dim), (0, 2, 1, 3)
        base = torch.empty(shape, dtype=dtype)
        bits = BITS[dtype]
        info = torch.iinfo(bits)
        base.view(bits).copy_(torch.randint(info.min, info.max + 1, shape, generator=g, dtype=bits))
        view = base.permute(*block_dim_view) if block_dim_view else base
        out.append(Cache(base, view))
    return out


def block_bits(c: Cache, layout: str, b: int) -> torch.Tensor:
    return c.bits()[:, b] if layout == "legacy" else c.bits()[b]


layouts = st.sampled_from(["vllm", "legacy", "permuted"])
dtypes = st.sampled_from([torch.bfloat16, torch.float16, torch.float32])


@st.composite
def swap_cases(draw):
    """A cache geometry plus block tables of several requests and their swap-in destinations."""
    layout, dtype = draw(layouts), draw(dtypes)
    geo = dict(
        layers=draw(st.integers(1, 3)),
        num_blocks=draw(st.integers(2, 24)),
        heads=draw(st.integers(1, 3)),
        block_size=draw(st.sampled_from([1, 2, 3, 16])),
        head_dim=draw(st.sampled_from([1, 3, 8])),
    )
    nb = geo["num_blocks"]
    out_ids = draw(st.permutations(range(nb)))[: draw(st.integers(1, nb))]
    cuts = sorted(draw(st.lists(st.integers(0, len(out_ids)), max_size=4)))
    parts = [out_ids[a:b] for a, b in zip([0, *cuts], [*cuts, len(out_ids)]) if b > a]
    tables = {f"r{i}": list(p) for i, p in enumerate(parts)}
    dst = draw(st.permutations(range(nb)))[: len(out_ids)]
    order = draw(st.permutations(list(tables)))
    split = draw(st.integers(1, len(order)))
    return layout, dtype, geo, tables, dst, order, split


def block_dim(layout: str) -> int:
    return 1 if layout == "legacy" else 0


@pytest.fixture(scope="module", autouse=True)
def _native_built():
    """Fail loudly (not skip) when the extension is missing: scripts/setup.sh must have built it."""
    load_kvswap()


def test_native_extension_is_built():
    mod = load_kvswap()
    assert hasattr(torch.ops.teola_kvswap, "gather") and mod.WITH_CUDA in (0, 1)


@pytest.mark.parametrize("backend", BACKENDS)
@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(case=swap_cases(), seed=st.integers(0, 2**31 - 1))
def test_swap_roundtrip_is_bit_exact(backend, case, seed):
    layout, dtype, geo, tables, dst, order, split = case
    caches = make_caches(layout, dtype, seed=seed, **geo)
    mgr = KVSwapManager([c.view for c in caches], block_dim=block_dim(layout), backend=backend)
    before = [c.bits() for c in caches]

    stats = mgr.swap_out(tables)
    n = sum(len(t) for t in tables.values())
    assert (stats.blocks, stats.bytes) == (n, n * mgr.record_bytes)
    assert all(torch.equal(c.bits(), b) for c, b in zip(caches, before)), "swap-out wrote the cache"

    # The freed blocks get reused: scribble over them, then remember the whole cache.
    for c in caches:
        for b in (b for t in tables.values() for b in t):
            (c.base[:, b] if layout == "legacy" else c.base[b]).view(BITS[dtype]).fill_(0x5A5A)
    reused = [c.bits() for c in caches]

    it = iter(dst)
    dest = {rid: [next(it) for _ in tables[rid]] for rid in order}
    for group in (order[:split], order[split:]):
        if group:
            mgr.swap_in({rid: dest[rid] for rid in group})

    written = set()
    for rid, table in tables.items():
        for src_b, dst_b in zip(table, dest[rid]):
            written.add(dst_b)
            for c, b0 in zip(caches, before):
                want = b0[:, src_b] if layout == "legacy" else b0[src_b]
                assert torch.equal(block_bits(c, layout, dst_b), want), (rid, src_b, dst_b)
    for b in set(range(geo["num_blocks"])) - written:
        for c, r in zip(caches, reused):
            want = r[:, b] if layout == "legacy" else r[b]
            assert torch.equal(block_bits(c, layout, b), want), f"untouched block {b} changed"
    assert len(mgr._swapped) == 0 and mgr.host_bytes == 0
    assert mgr.totals.blocks_out == mgr.totals.blocks_in == n


@settings(max_examples=40, deadline=None)
@given(
    layout=layouts,
    dtype=dtypes,
    seed=st.integers(0, 2**31 - 1),
    ids=st.lists(st.integers(0, 11), min_size=1, max_size=20),
)
def test_native_and_fallback_write_the_same_host_bytes(layout, dtype, seed, ids):
    caches = make_caches(layout, dtype, layers=2, num_blocks=12, heads=2, block_size=4, head_dim=8, seed=seed)
    views = [c.view for c in caches]
    bufs = []
    for backend in BACKENDS:
        mgr = KVSwapManager(views, block_dim=block_dim(layout), backend=backend)
        mgr.swap_out({"r": ids})  # repeated ids are allowed on the way out
        bufs.append(mgr._swapped["r"].extent)
    assert torch.equal(bufs[0], bufs[1])


@settings(max_examples=30, deadline=None)
@given(
    layout=layouts,
    dtype=dtypes,
    seed=st.integers(0, 2**31 - 1),
    mode=st.sampled_from([-1, 0, 1]),
    threads=st.sampled_from([0, 1, 2, 3]),
    head_dim=st.sampled_from([3, 8, 64]),
    n=st.integers(1, 40),
)
def test_native_copy_modes_and_threads_roundtrip(layout, dtype, seed, mode, threads, head_dim, n):
    """Streaming stores (odd, unaligned chunk sizes included) and the OpenMP path, forced on."""
    ops = torch.ops.teola_kvswap
    caches = make_caches(
        layout, dtype, layers=3, num_blocks=48, heads=2, block_size=16, head_dim=head_dim, seed=seed
    )
    views, bd = [c.view for c in caches], block_dim(layout)
    g = torch.Generator().manual_seed(seed)
    ids = torch.randperm(48, generator=g)[:n]
    rec = ops.record_bytes(views, bd)
    want = torch.empty(n * rec, dtype=torch.uint8)
    gather_blocks(describe_layers(views, bd)[0], ids.tolist(), want, rec)
    got = torch.empty(n * rec + 1, dtype=torch.uint8)[1:]  # odd address: unaligned destination
    ops.gather(views, ids, got, bd, mode, threads)
    assert torch.equal(got, want)
    before = [c.bits() for c in caches]
    dst = torch.randperm(48, generator=g)[:n]
    ops.scatter(got, views, dst, bd, mode, threads)
    for c, b0 in zip(caches, before):
        for s_, d_ in zip(ids.tolist(), dst.tolist()):
            want_b = b0[:, s_] if layout == "legacy" else b0[s_]
            assert torch.equal(block_bits(c, layout, d_), want_b)


# ---- bad input raises before any write ----------------------------------------------------------


def small(layout="vllm", dtype=torch.float32):
    caches = make_caches(layout, dtype, layers=2, num_blocks=8, heads=2, block_size=4, head_dim=4)
    return caches, [c.bits() for c in caches]


def unchanged(caches, before):
    return all(torch.equal(c.bits(), b) for c, b in zip(caches, before))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("bad", [8, -1, 10**12])
def test_out_of_range_block_ids_raise(backend, bad):
    caches, before = small()
    mgr = KVSwapManager([c.view for c in caches], backend=backend)
    with pytest.raises(ValueError, match="out of range"):
        mgr.swap_out({"r": [1, bad]})
    mgr.swap_out({"r": [1, 2]})
    with pytest.raises(ValueError, match="out of range"):
        mgr.swap_in({"r": [bad, 3]})
    assert unchanged(caches, before) and "r" in mgr


@pytest.mark.parametrize("backend", BACKENDS)
def test_swap_in_checks_counts_duplicates_and_state(backend):
    caches, before = small()
    mgr = KVSwapManager([c.view for c in caches], backend=backend)
    mgr.swap_out({"a": [1, 2], "b": [3]})
    with pytest.raises(ValueError, match="2 were swapped out"):
        mgr.swap_in({"a": [4]})
    with pytest.raises(ValueError, match="appears twice"):
        mgr.swap_in({"a": [4, 5], "b": [5]})
    with pytest.raises(ValueError, match="not swapped out"):
        mgr.swap_in({"zzz": [0]})
    with pytest.raises(ValueError, match="already swapped out"):
        mgr.swap_out({"a": [0]})
    with pytest.raises(TypeError, match="ints"):
        mgr.swap_out({"c": [1.5]})
    assert unchanged(caches, before)
    mgr.drop(["a", "b"])
    assert mgr.host_bytes == 0


@pytest.mark.parametrize("backend", BACKENDS)
def test_swap_in_can_skip_leading_host_blocks(backend):
    caches, before = small()
    mgr = KVSwapManager([c.view for c in caches], backend=backend)
    mgr.swap_out({"a": [1, 2, 3], "b": [4]})
    with pytest.raises(ValueError, match="1 skipped"):
        mgr.swap_in({"a": [5]}, skip={"a": 1})
    with pytest.raises(ValueError, match="skip must be"):
        mgr.swap_in({"a": []}, skip={"a": 4})
    stats = mgr.swap_in({"a": [6], "b": [7]}, skip={"a": 2})  # a's blocks 1 and 2 stay where they are
    assert (stats.blocks, stats.bytes) == (2, 2 * mgr.record_bytes)
    for c, b0 in zip(caches, before):
        assert torch.equal(block_bits(c, "vllm", 6), b0[3]) and torch.equal(block_bits(c, "vllm", 7), b0[4])
        assert torch.equal(block_bits(c, "vllm", 5), b0[5])  # not written
    assert "a" not in mgr and "b" not in mgr and mgr.host_bytes == 0


@pytest.mark.parametrize("backend", BACKENDS)
def test_bad_cache_shapes_raise(backend):
    base = torch.zeros(8, 2, 4, 8)
    with pytest.raises(ValueError, match="dense"):
        KVSwapManager([base[::2]], backend=backend)
    with pytest.raises(ValueError, match="planes"):
        KVSwapManager([torch.zeros(2, 8, 4, 4), torch.zeros(3, 8, 4, 4)], block_dim=1, backend=backend)
    with pytest.raises(ValueError, match="block_dim"):
        KVSwapManager([base], block_dim=2, backend=backend)
    with pytest.raises(ValueError, match="at least"):
        KVSwapManager([torch.zeros(8)], backend=backend)
    with pytest.raises(ValueError, match="empty"):
        KVSwapManager([], backend=backend)
    with pytest.raises(ValueError, match="contiguous"):
        KVSwapManager([base.transpose(0, 1)], backend=backend)  # blocks interleaved with heads


def test_native_ops_validate_on_their_own():
    """The C++ checks guard direct callers of torch.ops.teola_kvswap too."""
    load_kvswap()
    ops = torch.ops.teola_kvswap
    caches, before = small()
    views = [c.view for c in caches]
    rec = ops.record_bytes(views, 0)
    assert rec == 2 * 2 * 4 * 8 * 4
    buf = torch.empty(2 * rec, dtype=torch.uint8)
    cases = [
        (lambda: ops.gather(views, torch.tensor([0, 8]), buf, 0), "out of range"),
        (lambda: ops.gather(views, torch.tensor([0, -3]), buf, 0), "out of range"),
        (lambda: ops.gather(views, torch.tensor([0, 1, 2]), buf, 0), "buffer holds"),
        (lambda: ops.gather(views, torch.tensor([0.0, 1.0]), buf, 0), "int64 or int32"),
        (lambda: ops.gather(views, torch.tensor([[0, 1]]), buf, 0), "1-D"),
        (lambda: ops.gather(views, torch.tensor([0, 1]), buf, 3), "block_dim"),
        (lambda: ops.scatter(buf, views, torch.tensor([4, 4]), 0), "appears twice"),
        (lambda: ops.scatter(buf[::2], views, torch.tensor([4]), 0), "contiguous"),
        (
            lambda: ops.gather(
                views, torch.tensor([0, 1]), caches[0].base.view(-1).view(torch.uint8)[: 2 * rec], 0
            ),
            "shares memory",
        ),
    ]
    for call, msg in cases:
        with pytest.raises(RuntimeError, match=msg):
            call()
    assert unchanged(caches, before)
    ops.gather(views, torch.tensor([3, 0], dtype=torch.int32), buf, 0)
    ops.gather(views, torch.tensor([], dtype=torch.int64), buf[:0], 0)


def test_build_script_is_idempotent():
    out = subprocess.run(
        ["bash", str(ROOT / "csrc" / "build.sh")],
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
        env=ENV,
    )
    assert "up to date" in out.stdout or "done in" in out.stdout


@pytest.mark.skipif(
    shutil.which("nvcc") is None and not Path("/usr/local/cuda/bin/nvcc").exists(),
    reason="no nvcc on this machine",
)
def test_cuda_sources_compile_with_nvcc():
    """No GPU needed: the kernels and the torch binding compile with nvcc (cached by source hash)."""
    out = subprocess.run(
        ["bash", str(ROOT / "csrc" / "check_cuda.sh")], capture_output=True, text=True, timeout=900, env=ENV
    )
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-4000:]
    assert "passed" in out.stdout or "up to date" in out.stdout
