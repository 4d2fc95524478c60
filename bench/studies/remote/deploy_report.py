"""The page of the deployment study (bench/studies/remote/deploy.py): latency per point and system, each
baseline's mean over teola's with a paired bootstrap 95% interval over queries, the equal-work checks (LLM
calls, prompt and output tokens per call, client- and server-side) and the per-stage busy time."""

from __future__ import annotations

import statistics
from typing import Any

import numpy as np

from bench.lib.tables import NONE, ci, num, table

BOOTSTRAP = 2000
SYSTEMS = ("teola", "LangGraph", "LlamaIndex")


def paired(entry_a: dict[str, Any], entry_b: dict[str, Any]) -> tuple[list[float], list[float]]:
    """Latencies of the queries (trial, index) both systems answered, in the same order."""
    a = {(r["trial"], r["i"]): r["latency"] for r in entry_a["records"] if r.get("ok")}
    b = {(r["trial"], r["i"]): r["latency"] for r in entry_b["records"] if r.get("ok")}
    keys = sorted(a.keys() & b.keys())
    return [a[k] for k in keys], [b[k] for k in keys]


def ratio_ci(base: list[float], teola: list[float], seed: int = 0) -> tuple[float, float, float] | None:
    """mean(base) / mean(teola) and its 95% interval, resampling the paired queries (fixed seed)."""
    if not base:
        return None
    x, y = np.asarray(base), np.asarray(teola)
    idx = np.random.default_rng(seed).integers(0, len(x), size=(BOOTSTRAP, len(x)))
    boots = x[idx].mean(axis=1) / y[idx].mean(axis=1)
    lo, hi = np.percentile(boots, [2.5, 97.5])
    return float(x.mean() / y.mean()), float(lo), float(hi)


def calls_of(entry: dict[str, Any]) -> dict[tuple[int, int], list[list[int]]]:
    return {(r["trial"], r["i"]): r["calls"] for r in entry["records"] if r.get("ok")}


def equal_work(point: dict[str, Any]) -> dict[str, Any]:
    """Per system: mean LLM calls, prompt and output tokens per query, and the share of its queries
    whose [prompt, output] tokens per call equal teola's for the same query."""
    ref = calls_of(point["teola"]) if "teola" in point else {}
    out = {}
    for system, entry in point.items():
        mine = calls_of(entry)
        rows = list(mine.values())
        same = [mine[k] == ref[k] for k in mine.keys() & ref.keys()]
        out[system] = {
            "calls": _mean([len(c) for c in rows]),
            "prompt": _mean([sum(p for p, _ in c) for c in rows]),
            "output": _mean([sum(o for _, o in c) for c in rows]),
            "same_as_teola": (sum(same) / len(same)) if same else None,
            "prefills": _mean([r.get("prefills", 0) for r in entry["records"] if r.get("ok")]),
            "server": _server(entry["runs"], len(entry["records"])),
        }
    return out


def _server(runs: list[dict[str, Any]], n: int) -> dict[str, float]:
    keys = ("request_success_total", "prompt_tokens_total", "generation_tokens_total")
    out = {k.split("_total")[0]: sum(r["server"][k] for r in runs) / max(n, 1) for k in keys}
    out["client_cpu"] = sum(r["cpu"] for r in runs) / max(n, 1) if all("cpu" in r for r in runs) else None
    return out


def busy_means(entry: dict[str, Any]) -> dict[str, float]:
    ok = [r["busy"] for r in entry["records"] if r.get("ok")]
    ops = sorted({op for b in ok for op in b})
    return {op: statistics.fmean(b.get(op, 0.0) for b in ok) for op in ops} if ok else {}


def _mean(xs: list[float]) -> float | None:
    return statistics.fmean(xs) if xs else None


def systems_of(res: dict[str, Any]) -> list[str]:
    """teola first, then the others in the order they appear."""
    names = list(dict.fromkeys(s for row in res["points"].values() for s in row))
    return sorted(names, key=lambda s: (s != "teola", SYSTEMS.index(s) if s in SYSTEMS else len(SYSTEMS)))


def latency_rows(res: dict[str, Any]) -> list[str]:
    systems = systems_of(res)
    rows = []
    for point, row in res["points"].items():
        means = [
            _mean([r["latency"] for r in row[s]["records"] if r.get("ok")]) if s in row else None
            for s in systems
        ]
        cis = []
        for base in systems[1:]:
            r = ratio_ci(*paired(row[base], row["teola"])) if base in row and "teola" in row else None
            cis.append(NONE if r is None else ci(*r))
        failed = ", ".join(
            f"{s} {sum(not r.get('ok') for r in row[s]['records'])}" for s in systems if s in row
        )
        rate = row["teola"]["rate"] if "teola" in row else None
        rows.append([point, num(rate, 3), *(num(m, 2) for m in means), *cis, failed])
    return table(
        [
            "point",
            "rate (q/s)",
            *(f"{s} mean (s)" for s in systems),
            *(f"{s} / teola [95% CI]" for s in systems[1:]),
            "failed",
        ],
        rows,
    )


def work_rows(res: dict[str, Any]) -> list[str]:
    alone = res["points"].get("alone", {})
    rows = []
    for system, w in equal_work(alone).items():
        sv = w["server"]
        rows.append(
            [
                system,
                num(w["calls"], 2),
                num(w["prompt"], 0),
                num(w["output"], 0),
                f"{num(None if w['same_as_teola'] is None else 100 * w['same_as_teola'], 0)}%",
                num(w["prefills"], 1),
                num(sv["request_success"], 1),
                num(sv["prompt_tokens"], 0),
                num(sv["generation_tokens"], 0),
                num(sv["client_cpu"], 3),
            ]
        )
    return table(
        [
            "system",
            "LLM calls",
            "prompt tok",
            "output tok",
            "calls equal to teola's",
            "prefill-only calls",
            "server: requests",
            "server: prompt tok",
            "server: generated tok",
            "client CPU (s)",
        ],
        rows,
    )


def busy_rows(res: dict[str, Any]) -> list[str]:
    alone = res["points"].get("alone", {})
    per = {s: busy_means(e) for s, e in alone.items()}
    ops = sorted({op for b in per.values() for op in b})
    return table(["system", *ops], ([s, *(num(b.get(op), 2) for op in ops)] for s, b in per.items()))


def load_line(res: dict[str, Any]) -> str:
    loads = [r["loadavg"][0] for row in res["points"].values() for e in row.values() for r in e["runs"]]
    return f"1-min load average after the runs: {min(loads):.1f}-{max(loads):.1f} (2 cores)." if loads else ""


def markdown(data: dict[str, Any]) -> str:
    s = data["settings"]
    lines = [
        f"# Deployment benchmarks: LLM emulated (profile {s['profile']}), everything else measured",
        "",
        f"Command: `{data.get('command', 'python -m bench deploy')}` (commit "
        f"{data.get('machine', {}).get('commit')}, {data.get('wall_seconds', 0) / 60:.1f} min). The LLM is "
        f"`teola emulate --profile {s['profile']} --output-len max`, one emulator process per system (no "
        "shared prefix cache); MiniLM, the reranker and pgvector run in process on this machine's 2 CPU "
        "cores, shared with other work (load below). Systems, prompts and equal work: "
        "bench/studies/remote/deploy_systems.py. LlamaIndex's LLM is llama-index's own `OpenAILike` on the "
        "chat API since commit e01ba23 (before it, the tool agent's and search generation's LlamaIndex "
        "called teola's remote-LLM adapter).",
        "",
        "Systems interleaved (order rotated per trial and rate); each workload's trials, queries and rates "
        "are under its heading. Ratios: baseline mean / teola mean over the same queries, paired "
        f"bootstrap 95% interval ({BOOTSTRAP} resamples, seed 0); > 1 means teola is faster.",
        "",
    ]
    for name, res in data["workloads"].items():
        ws = res.get("settings", s)
        setup = (
            f"Trials {res.get('trials_done', ws['trials'])} of {ws['trials']}, {ws['alone']} queries alone, "
            f"{ws['queries']} per trace, rates {', '.join(f'{f:g}' for f in ws['fractions'])} x LangGraph's "
            "service rate alone."
        )
        lines += [
            f"## {name}",
            "",
            setup,
            "",
            *latency_rows(res),
            "",
            load_line(res),
            "",
            "Work per query alone (client traces; server: the emulator's counters per query):",
            "",
            *work_rows(res),
            "",
            "Busy time per stage alone (s per query, union of its calls' execution):",
            "",
            *busy_rows(res),
            "",
        ]
    return "\n".join(lines)
