"""The mechanism section of the SIMULATED Autellix page (bench/studies/sim/sim_autellix_report.py): the
engine over time at the load of the largest gap, the KV memory sweep and the longer traces, from the
probes bench.studies.sim.sim_autellix samples."""

from __future__ import annotations

from typing import Any

from bench.lib.tables import line, num, rule


def mechanism_section(data: dict[str, Any]) -> list[str]:
    """The engine over time at each workload's load of the largest gap, then the KV sweep and the longer
    traces."""
    lines = [
        "### Mechanism: the engine over time at the load of the largest gap",
        "",
        "Sampled every 1/200 of the arrival window, from the first program's arrival to the last's (the "
        "drain after it, where the longest programs run almost alone, is left out; "
        "bench.studies.sim.sim_autellix.Probe): calls waiting (teola's queue + the engine's), the running "
        "batch, KV blocks held (share of the cache; 'full': share of samples at >= 95%), preemptions by the "
        "policy (calls aborted for a better queue) and by the engine (KV ran out: recompute), engine busy "
        "seconds (whole run).",
        "",
        line(
            [
                "workload",
                "load",
                "system",
                "token latency (ms)",
                "waiting, mean / p95",
                "running, mean / max",
                "KV held, mean / full",
                "preemptions, policy / KV",
                "recomputed tokens (KV)",
                "busy s",
            ]
        ),
        rule("lrlrrrrrrr"),
    ]
    for kind, w in data["workloads"].items():
        load = w["gap_load"]
        for r in w["rows"]:
            if r["load"] != load or r.get("kv_scale", 1.0) != 1.0:
                continue
            m = r["mechanism"]
            lines.append(
                line(
                    [
                        kind,
                        num(load, 2),
                        r["system"],
                        num(1000 * r["tok_mean"], 0),
                        f"{m['queue_mean']:.1f} / {m['queue_p95']:.0f}",
                        f"{m['running_mean']:.1f} / {m['running_max']}",
                        f"{m['kv_mean']:.0%} / {m['kv_full']:.0%}",
                        f"{r['preemptions']} / {m['kv_preemptions']}",
                        num(m["kv_recomputed_tokens"], 0, ","),
                        num(m["engine_busy_s"], 0),
                    ]
                )
            )
    return lines + kv_sweep_lines(data) + long_trace_lines(data) + [""]


def kv_sweep_lines(data: dict[str, Any]) -> list[str]:
    """The KV cache scaled at one workload and load, and teola's admission reserving KV (none if not run)."""
    sweep = data.get("kv_sweep")
    lines: list[str] = []
    if sweep:
        lines += [
            "",
            "KV memory per engine (the property the gain should come from: a queue forms when the running "
            f"batch is bounded by KV, not by max_num_seqs): {sweep['kind']} at load {sweep['load']:.2f}, KV "
            "cache scaled; and at the profile's KV with teola's admission also reserving each call's prompt "
            "+ output tokens of KV (what it does on the real vLLM adapter, which declares its KV size; the "
            "simulated engine declares none, so elsewhere here admission is max_num_seqs calls and the "
            "engine alone manages KV):",
            "",
            line(
                [
                    "KV cache (tokens)",
                    "admission",
                    "engine's KV preemption",
                    "system",
                    "token latency (ms)",
                    "mean (s)",
                    "waiting, mean",
                    "running, mean",
                    "KV full",
                    "preemptions, policy / KV",
                ]
            ),
            rule("rlllrrrrrr"),
        ]
        for r in sorted(
            sweep["rows"],
            key=lambda r: (
                r["kv_scale"],
                bool(r.get("token_budget")),
                r.get("kv_preemption") or "",
                r["system"],
            ),
        ):
            m = r["mechanism"]
            adm = "calls + KV reserved" if r.get("token_budget") else "max_num_seqs calls"
            how = r.get("kv_preemption") or ("recompute" if r["system"] in ("vllm", "vllm-opt") else "swap")
            lines.append(
                line(
                    [
                        f"{int(data['kv_tokens'] * r['kv_scale']):,}",
                        adm,
                        how,
                        r["system"],
                        num(1000 * r["tok_mean"], 0),
                        num(r["mean"]),
                        num(m["queue_mean"]),
                        num(m["running_mean"]),
                        f"{m['kv_full']:.0%}",
                        f"{r['preemptions']} / {m['kv_preemptions']}",
                    ]
                )
            )
    return lines


def long_trace_lines(data: dict[str, Any]) -> list[str]:
    """Each workload at its highest load with a longer trace (none if not run)."""
    long = data.get("long")
    lines: list[str] = []
    if long:
        lines += [
            "",
            "Trace length (load, the other property): each workload at its highest load with "
            f"{long['factor']}x the programs (arrivals over a window that many times longer), vLLM-opt and "
            "Autellix:",
            "",
            line(
                [
                    "workload",
                    "load",
                    "programs",
                    "system",
                    "token latency (ms)",
                    "mean (s)",
                    "p99 (s)",
                    "waiting, mean / p95",
                    "running, mean / max",
                    "KV held, mean / full",
                    "preemptions, policy / KV",
                ]
            ),
            rule("lrrlrrrrrrr"),
        ]
        for r in long["rows"]:
            m = r["mechanism"]
            lines.append(
                line(
                    [
                        r["kind"],
                        num(r["load"], 2),
                        r["programs"],
                        r["system"],
                        num(1000 * r["tok_mean"], 0),
                        num(r["mean"]),
                        num(r["p99"]),
                        f"{m['queue_mean']:.1f} / {m['queue_p95']:.0f}",
                        f"{m['running_mean']:.1f} / {m['running_max']}",
                        f"{m['kv_mean']:.0%} / {m['kv_full']:.0%}",
                        f"{r['preemptions']} / {m['kv_preemptions']}",
                    ]
                )
            )
    return lines
