"""The page of the program-scheduling study on vLLM (bench/studies/programs/programs_vllm.py): how the
policies act, one table per workload under the four policies, throughput at equal latency, the two
instances under three balancers, and a reading generated from the numbers."""

from __future__ import annotations

from typing import Any

from bench.lib.tables import num, table
from bench.studies.programs.programs_vllm_setup import ENGINE, SHAPES
from teola.sim.program_runs import QUEUES


def markdown(res: dict[str, Any]) -> str:
    """The page of a run: its intro, the policy runs per workload, throughput at equal latency, the
    balancer runs and the reading."""
    p = res["policies"]
    out = intro(res) + [f"Policy runs: {_load(p)}.", ""]
    for kind in [k for k in ("chat", "tree") if k in p]:
        out += policy_section(kind, p[kind])
    out += throughput_lines(res) + balancer_section(res["balancers"])
    out += (
        ["", "**Reading (generated from the numbers above):**", ""] + [f"- {x}" for x in reading(res)] + [""]
    )
    return "\n".join(out)


def intro(res: dict[str, Any]) -> list[str]:
    """The engine, the workloads, the policies and the commands that ran, and how the policies act."""
    return [
        "## Program-level scheduling on vLLM (bench/studies/programs/programs_vllm.py)",
        "",
        f"Real engine: {ENGINE['model']} on vLLM {res['vllm']} (CPU), max {ENGINE['max_num_seqs']} running "
        "sequences, through the teola runtime; programs submitted with `teola.api.program.Program`, every "
        "call decoding exactly its drawn output length (`ignore_eos`). Workloads: the chat / tree "
        f"generators of teola/sim/program_workloads.py shrunk to {SHAPES}; text: {res['text_source']}. "
        f"Poisson program arrivals, seed {res['seed']}; latency = program completion - arrival. Policies: "
        f"FCFS = teola's `fifo`; MLFQ / PLAS / ATLAS with queues {QUEUES} (service = decoded tokens). "
        + "; then ".join(f"`{r['command']}` ({r['wall_seconds']:.0f} s wall)" for r in res["runs"])
        + " (engine start-ups included). The machine is shared: each section "
        "gives the 1-minute load average before and after it (2 cores; above ~2 something else was "
        "running and competed for them).",
        "",
        "How the policies act here: under FCFS every call goes to vLLM as it comes (vLLM batches them). "
        "Under MLFQ / PLAS / ATLAS teola admits at most the engine's max efficient batch of calls into vLLM, "
        "charges each call's decoded tokens as they stream (demotion mid-call) and preempts a running call "
        "of a worse queue for a waiting one: abort in vLLM, resume later as prompt + decoded token ids "
        "(teola/runtime/engine_tier/preemption.py). Preemptions and the tokens the resumed runs re-sent (and "
        "the prefix cache held) are in the last columns.",
        "",
    ]


def policy_section(kind: str, s: dict[str, Any]) -> list[str]:
    """One workload on one instance: its capacity and burst, then each load under each policy."""
    b = s["burst"]
    return [
        f"### {kind} ({'single-threaded' if kind == 'chat' else 'multi-threaded'}), 1 instance; "
        f"capacity {s['capacity']:.2f} programs/s ({b['programs']} programs at t=0 under FCFS: "
        f"{b['wall']:.1f} s, {b['calls']} calls, {b['output_tokens']} decoded tokens)",
        "",
        *table(
            [
                "load",
                "rate (prog/s)",
                "policy",
                "programs",
                "mean (s)",
                "P50 (s)",
                "P95 (s)",
                "P99 (s)",
                "wall (s)",
                "preemptions",
                "re-sent tokens (cached)",
            ],
            (
                [
                    num(r["load"], 2),
                    num(r["rate"], 3),
                    "fcfs" if r["policy"] == "fifo" else r["policy"],
                    r["programs"],
                    *(num(r[k], 2) for k in ("mean", "p50", "p95", "p99")),
                    num(r["wall"]),
                    r.get("preemptions", 0),
                    f"{r.get('resumed_tokens', 0)} ({r.get('resumed_cached_tokens', 0)})",
                ]
                for r in s["rows"]
            ),
            "rrlrrrrrrrr",
        ),
        "",
    ]


def throughput_lines(res: dict[str, Any]) -> list[str]:
    """Throughput at equal latency on the tree workload (none if it did not run)."""
    p = res["policies"]
    out: list[str] = []
    t = res.get("throughput_ratio")
    if t:
        ratio = "n/a" if t["ratio"] is None else f"{t['ratio']:.2f}x"
        out += [
            f"**Throughput at equal latency (tree workload):** at a mean-latency target of {t['target']:.2f} "
            f"s (1.5x FCFS's mean at the lowest load), FCFS sustains {_fmt(t['fcfs_rate'])} programs/s and "
            f"ATLAS {_fmt(t['atlas_rate'])} programs/s: ATLAS/FCFS = {ratio} (linear interpolation between "
            "the measured rates, no extrapolation: a policy that still meets the target at the highest "
            "measured rate is credited with that rate)." + _spread(p.get("tree", {}).get("fifo_repeat")),
            "",
        ]
    return out


def balancer_section(b: dict[str, Any]) -> list[str]:
    """Two instances, chat over a per-program document, PLAS, under each balancer."""
    return [
        f"### 2 instances (each vLLM worker bound to its own core), chat over a ~500-token per-program "
        f"document, PLAS, {b['programs']} programs ({b['calls_per_program']:.1f} calls each); locality "
        f"threshold {b['threshold']} prompt tokens (every call here is longer, so locality pins every "
        f"program); {_load(b)}",
        "",
        *table(
            [
                "balancer",
                "rate (prog/s)",
                "mean (s)",
                "P50 (s)",
                "P95 (s)",
                "P99 (s)",
                "prompt tokens",
                "cached tokens",
                "programs split over 2 instances",
                "calls per instance",
            ],
            (
                [
                    r["balancer"],
                    num(r["rate"], 3),
                    *(num(r[k], 2) for k in ("mean", "p50", "p95", "p99")),
                    r["prompt_tokens"],
                    r["cached_tokens"],
                    r["programs_on_several_instances"],
                    ", ".join(f"{k}: {v}" for k, v in sorted(r["calls_per_instance"].items())),
                ]
                for r in b["rows"]
            ),
            "lrrrrrrrrl",
        ),
    ]


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
            rel = ", ".join(
                f"{p} {_pct(at[p]['mean'], f['mean'])} mean / {_pct(at[p]['p95'], f['p95'])} P95"
                for p in ("mlfq", "plas", "atlas")
            )
            best = min(at.values(), key=lambda r: r["mean"])["policy"]
            lines.append(
                f"{kind}, load {load:.2f}: vs FCFS ({f['mean']:.2f} s mean, {f['p95']:.2f} s P95): {rel}; "
                f"lowest mean: {'fcfs' if best == 'fifo' else best}."
            )
        n = s.get("fifo_repeat")
        if n:
            lines.append(
                f"{kind}: FCFS run twice at load {n['load']:.2f} gave means {n['mean'][0]:.2f} and "
                f"{n['mean'][1]:.2f} s (P95 {n['p95'][0]:.2f} / {n['p95'][1]:.2f} s): differences of that "
                "size between policies are run-to-run noise, not policy effects."
            )
    tree = SHAPES["tree"]
    lines.append(
        f"Why ATLAS is close to FCFS on this tree workload: a call's ATLAS priority is its critical path so "
        f"far, about {tree['out_mean']} decoded tokens per earlier step, and the first queue spans "
        f"{QUEUES['base_quantum']:.0f} tokens, so the calls of the first two steps of every program share "
        "queue 0 and keep their arrival order; only third steps drop a queue. PLAS sums all calls of a "
        "program and separates programs earlier. The quanta were chosen before the run and not tuned."
    )
    lines.append(
        "Each point is one run of the programs listed (P99 of under 20 programs is their maximum), so the "
        "tails are noisy. Priorities only reorder vLLM's waiting queue (max 8 running sequences) and "
        "are fixed once a call reaches the engine, so PLAS/ATLAS can act only when more calls wait than "
        "run; Autellix's gains come with preemptive quanta inside a modified vLLM, heavy-tailed program "
        "lengths and far longer runs, none of which this 2-core setup reproduces."
    )
    rows = res["balancers"]["rows"]
    for rate in sorted({r["rate"] for r in rows}):
        b = [r for r in rows if r["rate"] == rate]
        frac = ", ".join(
            f"{r['balancer']} {100 * r['cached_tokens'] / max(1, r['prompt_tokens']):.0f}%" for r in b
        )
        lat = ", ".join(f"{r['balancer']} {r['mean']:.2f} s / {r['p95']:.2f} s" for r in b)
        split = ", ".join(f"{r['balancer']} {r['programs_on_several_instances']}" for r in b)
        lines.append(
            f"2 instances at {rate:.2f} programs/s: prompt tokens served from the prefix cache: {frac}; "
            f"mean / P95 latency: {lat}; programs whose calls ran on both instances: {split}."
        )
    if rows:
        lines.append(
            "Locality pins a program, on its first long call, to the instance least used at that moment and "
            "never moves it, so its document is prefilled once; the price is that a few programs can leave "
            "the two instances unevenly loaded (see calls per instance). Round-robin and least-used move "
            "programs between instances and prefill their documents again there."
        )
    return lines


def _spread(repeat: dict[str, Any] | None) -> str:
    if not repeat:
        return ""
    a, b = repeat["mean"]
    return (
        f" For scale, FCFS's mean at load {repeat['load']:.2f} moved by {100 * abs(a - b) / a:.0f}% between "
        "two runs of the same programs."
    )


def _load(part: dict[str, Any]) -> str:
    la = part.get("loadavg")
    if not la:
        return "load average not recorded"
    wall = f" ({part['wall_seconds']:.0f} s)" if "wall_seconds" in part else ""
    return f"load average {la[0]:.1f} before, {la[1]:.1f} after{wall}"


def _fmt(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.3f}"
