"""Swap time of N scattered KV blocks: batched native kernel vs a per-block copy loop vs memcpy.

For each N, N distinct random blocks of a multi-layer KV cache (vLLM 0.32 layout, default geometry
of SmolLM2-135M: 3 KV heads x 64 head dim, block 16, bf16) are gathered into a host buffer
(swap-out) and scattered back (swap-in) by
  - batched:   torch.ops.teola_kvswap (one call, OpenMP over all chunks),
  - per-block: one copy_ per (block, layer), the fallback and vLLM's swap_blocks pattern,
  - memcpy:    one contiguous copy of the same number of bytes, torch copy_ with 1 thread or all
               threads, whichever is faster (the machine's bandwidth bound),
all into pre-faulted buffers; plus KVSwapManager.swap_out/swap_in end to end (allocating a fresh
host buffer each swap-out, as the engine would).

    .venv/bin/python -m bench kv_swap    # writes bench/results/kv/kv_swap.{json,md}
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from pathlib import Path

import torch

from bench.lib.results import machine, results_dir  # noqa: E402
from bench.lib.tables import num, table  # noqa: E402
from engines.kvswap._native import load_kvswap  # noqa: E402
from engines.kvswap._native.kv_fallback import gather_blocks, scatter_blocks  # noqa: E402
from engines.kvswap._native.kv_layout import describe_layers  # noqa: E402
from engines.kvswap.swap import KVSwapManager  # noqa: E402

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}


def timeit(fn, repeats: int) -> float:
    """Median seconds of `repeats` runs after one warm-up."""
    fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def machine_info() -> dict:
    """bench.lib.results.machine()'s facts and the ones a copy kernel depends on."""
    return {
        **machine(),
        "torch_threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "kernel": platform.release(),
        "mem_gib": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1),
    }


def memcpy_1thread(dst: torch.Tensor, src: torch.Tensor, repeats: int) -> float:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return timeit(lambda: dst.copy_(src), repeats)
    finally:
        torch.set_num_threads(threads)


def bench_one(caches, layers, record, n: int, num_blocks: int, repeats: int, seed: int) -> dict:
    ops = torch.ops.teola_kvswap
    g = torch.Generator().manual_seed(seed)
    ids = torch.randperm(num_blocks, generator=g)[:n].sort().values
    ids = ids[torch.randperm(n, generator=g)]  # scattered and unordered, like a real block table
    id_list = ids.tolist()
    buf = torch.ones(n * record, dtype=torch.uint8)  # pre-faulted
    src = torch.ones_like(buf)
    nbytes = n * record
    r = {"blocks": n, "bytes": nbytes}
    r["memcpy_s"] = min(timeit(lambda: buf.copy_(src), repeats), memcpy_1thread(buf, src, repeats))
    r["batched_out_s"] = timeit(lambda: ops.gather(caches, ids, buf, 0), repeats)
    r["batched_out_memcpy_stores_s"] = timeit(lambda: ops.gather(caches, ids, buf, 0, 0), repeats)
    r["batched_in_s"] = timeit(lambda: ops.scatter(buf, caches, ids, 0), repeats)
    loop_reps = max(1, min(repeats, 3 if n >= 1024 else repeats))
    r["per_block_out_s"] = timeit(lambda: gather_blocks(layers, id_list, buf, record), loop_reps)
    r["per_block_in_s"] = timeit(lambda: scatter_blocks(buf, layers, id_list, record), loop_reps)

    mgr = KVSwapManager(caches, backend="native")
    table = {"r": id_list}

    def roundtrip():
        mgr.swap_out(table)
        mgr.swap_in(table)

    roundtrip()
    mgr.totals = type(mgr.totals)()
    for _ in range(repeats):
        roundtrip()
    r["manager_out_s"] = mgr.totals.seconds_out / repeats
    r["manager_in_s"] = mgr.totals.seconds_in / repeats

    r["speedup_out_vs_per_block"] = r["per_block_out_s"] / r["batched_out_s"]
    r["speedup_in_vs_per_block"] = r["per_block_in_s"] / r["batched_in_s"]
    r["batched_out_vs_memcpy"] = r["batched_out_s"] / r["memcpy_s"]
    r["batched_in_vs_memcpy"] = r["batched_in_s"] / r["memcpy_s"]
    r["memcpy_gbps"] = nbytes / r["memcpy_s"] / 1e9
    r["batched_out_gbps"] = nbytes / r["batched_out_s"] / 1e9
    r["batched_in_gbps"] = nbytes / r["batched_in_s"] / 1e9
    return r


def to_markdown(res: dict, cmd: str) -> str:
    cfg, m = res["config"], res["machine"]
    lines = [
        "## KV-cache swap kernel (csrc/, engines/kvswap/swap.py)",
        "",
        f"Swap N scattered KV blocks of a {cfg['layers']}-layer cache (vLLM 0.32 CPU layout "
        f"[num_blocks, {cfg['heads']}, {cfg['block_size']}, {2 * cfg['head_dim']}] {cfg['dtype']}, "
        f"{cfg['record_bytes'] // 1024} KiB per block over all layers, {cfg['num_blocks']} blocks "
        "in the cache) to a host buffer and back. *batched*: one `teola_kvswap` call; "
        "*per-block*: one `copy_` per block and layer (the fallback; vLLM's swap_blocks pattern); "
        "*memcpy*: one contiguous `copy_` of the same bytes (best of 1 thread and all threads). "
        "Median of "
        f"{cfg['repeats']} runs, pre-faulted buffers; *manager* = `KVSwapManager.swap_out` end to end "
        "(allocates the host buffer each time).",
        "",
        *table(
            [
                "N blocks",
                "MiB",
                "memcpy GB/s",
                "batched out GB/s",
                "batched in GB/s",
                "per-block / batched (out)",
                "per-block / batched (in)",
                "batched / memcpy (out)",
                "batched / memcpy (in)",
                "manager out ms",
            ],
            (
                [
                    r["blocks"],
                    num(r["bytes"] / 2**20),
                    num(r["memcpy_gbps"]),
                    num(r["batched_out_gbps"]),
                    num(r["batched_in_gbps"]),
                    f"{num(r['speedup_out_vs_per_block'])}x",
                    f"{num(r['speedup_in_vs_per_block'])}x",
                    num(r["batched_out_vs_memcpy"], 2),
                    num(r["batched_in_vs_memcpy"], 2),
                    num(r["manager_out_s"] * 1e3, 2),
                ]
                for r in res["results"]
            ),
            "r" * 10,
        ),
    ]
    lines += [
        "",
        "CPU only (no GPU here): these numbers are host-to-host copies. The CUDA path (one gather "
        "kernel + one cudaMemcpyAsync) is compile-checked with nvcc but not measured.",
        "",
        f"Reproduce: `{cmd}`",
        "",
        f"Machine: {m['cpu']}, {m['cores']} cores ({m['torch_threads']} torch threads), "
        f"{m['mem_gib']} GiB RAM, Linux {m['kernel']}, Python {m['python']}, torch {m['torch']}, "
        f"commit {m['commit']}. The cores are shared with other jobs; expect noise.",
        "",
    ]
    return "\n".join(lines)


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of `python -m bench kv_swap`."""
    p.add_argument("--sizes", default="16,64,256,1024,4096")
    p.add_argument("--layers", type=int, default=8)
    p.add_argument("--heads", type=int, default=3)
    p.add_argument("--head-dim", type=int, default=64)
    p.add_argument("--block-size", type=int, default=16)
    p.add_argument("--dtype", choices=sorted(DTYPES), default="bf16")
    p.add_argument("--num-blocks", type=int, default=0, help="cache size (default 1.5x max N)")
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--out", type=Path, default=results_dir("kv"))


def run_cli(a: argparse.Namespace, argv: list[str], p: argparse.ArgumentParser) -> None:
    """Runs `python -m bench kv_swap` (argv: the options given, for its page)."""
    load_kvswap()
    sizes = [int(s) for s in a.sizes.split(",")]
    num_blocks = a.num_blocks or int(max(sizes) * 1.5)
    caches = [
        torch.zeros(num_blocks, a.heads, a.block_size, 2 * a.head_dim, dtype=DTYPES[a.dtype])
        for _ in range(a.layers)
    ]
    for c in caches:
        c.view(torch.uint8).random_()
    layers, record = describe_layers(caches, 0)
    results = []
    for i, n in enumerate(sizes):
        r = bench_one(caches, layers, record, n, num_blocks, a.repeats, seed=i)
        results.append(r)
        print(
            f"N={n:5d} {r['bytes'] / 2**20:8.1f} MiB  memcpy {r['memcpy_gbps']:5.1f} GB/s  "
            f"batched out {r['batched_out_gbps']:5.1f} in {r['batched_in_gbps']:5.1f} GB/s  "
            f"per-block/batched out {r['speedup_out_vs_per_block']:5.1f}x "
            f"in {r['speedup_in_vs_per_block']:5.1f}x  batched/memcpy "
            f"{r['batched_out_vs_memcpy']:.2f}",
            flush=True,
        )
    cmd = "bash scripts/setup.sh && .venv/bin/python -m bench kv_swap" + (" " + " ".join(argv)).rstrip()
    res = {
        "config": {
            "sizes": sizes,
            "layers": a.layers,
            "heads": a.heads,
            "head_dim": a.head_dim,
            "block_size": a.block_size,
            "dtype": a.dtype,
            "num_blocks": num_blocks,
            "record_bytes": record,
            "repeats": a.repeats,
        },
        "machine": machine_info(),
        "command": cmd,
        "results": results,
    }
    a.out.mkdir(parents=True, exist_ok=True)
    (a.out / "kv_swap.json").write_text(json.dumps(res, indent=2) + "\n")
    (a.out / "kv_swap.md").write_text(to_markdown(res, cmd))
    print(f"wrote {a.out / 'kv_swap.json'} and {a.out / 'kv_swap.md'}")
