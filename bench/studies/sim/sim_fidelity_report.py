"""The page of the simulator fidelity study (bench.studies.sim.sim_fidelity): measured against simulated
latency per system and load, the decode-step and prompt-length checks, the profile's iteration costs."""

from __future__ import annotations

import statistics
from typing import Any

from bench.lib.tables import NONE, num, table
from bench.studies.rag.rag_setup import RATES
from bench.studies.sim.speed_probe import probe_lines

FIDELITY_SYSTEMS = ("teola", "LlamaDist-PO", "LlamaDistPC-TO")


def iteration_check(profile: dict[str, Any]) -> list[dict[str, Any]]:
    """Per-decode-step time, measured vs the fitted model. A profile whose decode batches were streamed
    has each iteration measured directly (the median time between a request's tokens while the whole
    batch decodes; the longer output length of each shape, whose window is longest); an older one
    gives the difference of two batches that differ only in output length, (T(long) - T(short)) /
    extra tokens, against the same difference of the model."""
    fit = profile["engines"]["vllm"].get("fit", {})
    if fit.get("steps"):
        best: dict[tuple, dict] = {}
        for r in fit["steps"]:
            key = (r["batch"], (r["prompt_tokens"] or 0) // 100)
            if key not in best or r["out_tokens"] > best[key]["out_tokens"]:
                best[key] = r
        return [
            {
                "batch": r["batch"],
                "prompt_tokens": r["prompt_tokens"],
                "measured_step_s": r["measured_s"],
                "predicted_step_s": r["predicted_s"],
                "error": r["error"],
                "direct": True,
                "runs": r.get("runs"),
                "context_tokens": r["context_tokens"],
                "linear_step_s": r.get("linear_s"),
                "held_out_error": r.get("held_out_error"),
            }
            for _, r in sorted(best.items())
        ]
    by: dict[tuple, dict[int, dict]] = {}
    for s in fit.get("samples", []):
        if s.get("out_tokens"):
            by.setdefault((s["batch"], s["prompt_tokens"] // 100), {})[s["out_tokens"]] = s
    rows = []
    for (batch, _), outs in sorted(by.items()):
        if len(outs) < 2:
            continue
        lo, hi = min(outs), max(outs)
        meas = (outs[hi]["measured_s"] - outs[lo]["measured_s"]) / (hi - lo)
        pred = (outs[hi]["predicted_s"] - outs[lo]["predicted_s"]) / (hi - lo)
        rows.append(
            {
                "batch": batch,
                "prompt_tokens": outs[lo]["prompt_tokens"],
                "measured_step_s": meas,
                "predicted_step_s": pred,
                "error": (pred - meas) / meas if meas > 0 else None,
            }
        )
    return rows


def step_bound(profile: dict[str, Any]) -> float | None:
    """The smallest worst relative error any non-negative coefficients of the iteration form
    (base + decode_seq * B + context_token * C) can reach on the profile's directly measured decode
    steps (every output length): a minimax fit, by linear programming. Above 10%, no fit of the
    linear form meets the per-step bar on these measurements, however it weighs them."""
    steps = profile["engines"]["vllm"].get("fit", {}).get("steps") or []
    if len(steps) < 3:
        return None
    import numpy as np
    from scipy.optimize import linprog  # installed with sentence-transformers; analysis only

    a = (
        np.array([[1.0, r["decode_seqs"], r["context_tokens"]] for r in steps])
        / np.array([r["measured_s"] for r in steps])[:, None]
    )
    ones = np.ones((len(a), 1))
    # variables: the three coefficients and t; minimise t with |a c - 1| <= t row by row
    res = linprog(
        np.r_[0.0, 0.0, 0.0, 1.0],
        A_ub=np.vstack([np.hstack([a, -ones]), np.hstack([-a, -ones])]),
        b_ub=np.r_[np.ones(len(a)), -np.ones(len(a))],
        bounds=[(0, None)] * 4,
    )
    return float(res.x[-1]) if res.success else None


def step_lines(data: dict[str, Any]) -> list[str]:
    """The per-step table of a profile whose decode batches were streamed: measured against the
    model, and (for a profile with a decode batch curve) against its linear part alone and with each
    batch's factor taken from its rows at the other prompt size (held out)."""
    its = [r for r in data["iterations"] if r["error"] is not None]
    curved = any(
        r.get("linear_step_s") and abs(r["linear_step_s"] - r["predicted_step_s"]) > 1e-9 for r in its
    )
    lines = [
        "",
        "Per decode step (vLLM iteration) of the fitted LLM cost model vs measured directly (the profile "
        "streams each decode batch: the median time between a request's tokens while every request of "
        "the batch decodes, 40-token outputs"
        + (
            f"; each batch run {data['repeats']} times, the median of the runs kept and the runs' range "
            "shown; a batch whose runs spread over 15% of their median is run as many times again, its "
            "number of runs shown"
            if data.get("repeats", 1) > 1
            else ""
        )
        + "):",
        "",
    ]
    extra = ["linear part (ms)", "its error", "batch factor held out: error"] if curved else []
    rows = [step_row(r, curved, data.get("repeats", 1)) for r in its]
    lines += table(
        [
            "batch",
            "prompt tokens",
            "context tokens in the batch",
            "measured step (ms)",
            "runs (ms)",
            "model step (ms)",
            "error",
            *extra,
        ],
        rows,
        "r" * (7 + len(extra)),
    )
    return lines + ["", steps_within(data, its, curved)]


def step_row(r: dict[str, Any], curved: bool, repeats: int) -> list[Any]:
    """One batch shape: measured step, the runs' range, the model's step and error; with a batch curve,
    its linear part, that part's error and the held-out factor's error."""
    m = r["measured_step_s"]
    runs = (f"{min(r['runs']) * 1e3:.0f}-{max(r['runs']) * 1e3:.0f}" if r.get("runs") else NONE) + (
        f" ({len(r['runs'])} runs)" if r.get("runs") and len(r["runs"]) != repeats else ""
    )
    row = [
        r["batch"],
        r["prompt_tokens"],
        f"{r['context_tokens']:,}",
        num(m * 1e3),
        runs,
        num(r["predicted_step_s"] * 1e3),
        f"{r['error']:+.0%}",
    ]
    if curved:
        held = r.get("held_out_error")
        row += [
            num(r["linear_step_s"] * 1e3),
            f"{(r['linear_step_s'] - m) / m:+.0%}",
            f"{held:+.0%}" if held is not None else NONE,
        ]
    return row


def steps_within(data: dict[str, Any], its: list[dict[str, Any]], curved: bool) -> str:
    """How many batch shapes the model gets within 10%: in all, by its linear part alone and with the
    held-out factors, and the best the linear form can do."""
    ok = [abs(r["error"]) <= 0.10 for r in its]
    text = f"{sum(ok)} of {len(ok)} batch shapes within 10% (the target: every one)."
    if curved:
        lin = [abs(r["linear_step_s"] - r["measured_step_s"]) / r["measured_step_s"] <= 0.10 for r in its]
        held = [abs(r["held_out_error"]) <= 0.10 for r in its if r.get("held_out_error") is not None]
        text += (
            " The model is the linear form times a decode batch curve whose factors come from these "
            f"step measurements, so its errors are in sample. The linear part alone: {sum(lin)} of "
            f"{len(lin)}; with each batch's factor taken only from its rows at the other prompt size: "
            f"{sum(held)} of {len(held)}."
        )
    if data.get("step_bound") is not None:
        text += (
            f" The best the linear form can do: a minimax fit of base + decode_seq x batch + context_token "
            "x context on the profile's step measurements (each shape at both output lengths) "
            f"still misses one by {data['step_bound']:.1%}."
        )
    return text


def prompt_lines(data: dict[str, Any]) -> list[str]:
    """Prompt tokens per query, real against the real-lengths replay's: the simulated engines retrieve
    their own chunks, so a query's prompt can differ from the one it had on the real engines."""
    sim, real = data.get("replay_prompts") or {}, data.get("real_lengths") or {}
    keys = [k for k in sim if k in real and all("prompt" in v for v in real[k].values())]
    if not keys:
        return []
    why = (
        "it gives each call its real prompt length, so this checks the replay took them"
        if has_prompts(real)
        else "the simulated retrieval picks its own chunks"
    )
    out = [
        "",
        f"Prompt tokens per query (decoding calls summed), real vs the real-lengths replay ({why}):",
        "",
    ]
    rows = []
    for key in keys:
        app, rate, system = key.split("|")
        pairs = [
            (v["prompt"][0], sim[key][q]) for q, v in real[key].items() if q in sim[key] and v["prompt"][0]
        ]
        r, s = statistics.fmean(a for a, _ in pairs), statistics.fmean(b for _, b in pairs)
        rows.append(
            [
                app,
                rate,
                system,
                num(r, 0),
                num(s, 0),
                f"{(s - r) / r:+.0%}",
                " ".join(f"{(b - a) / a:+.0%}" for a, b in pairs),
            ]
        )
    out += table(
        ["app", "rate", "system", "real mean", "simulated mean", "error", "per-query errors"], rows, "lllrrrl"
    )
    xs, ys = [], []  # per query: prompt-token error, and the real-lengths replay's latency error
    for key in keys:
        for (q, v), real_s, sim_s in zip(
            real[key].items(), data.get("real", {}).get(key, []), data.get("replay", {}).get(key, [])
        ):
            if q in sim[key] and v["prompt"][0] and real_s > 0:
                xs.append((sim[key][q] - v["prompt"][0]) / v["prompt"][0])
                ys.append((sim_s - real_s) / real_s)
    if len(xs) > 2 and statistics.pstdev(xs) > 0 and statistics.pstdev(ys) > 0:
        out += [
            "",
            f"Over the {len(xs)} queries of these traces, a query's prompt-token error and its replayed "
            f"latency error correlate at r = {statistics.correlation(xs, ys):.2f}.",
        ]
    return out


def replay_text(data: dict[str, Any]) -> str:
    """What the replayed columns take from the real run: runs before per-call prompts were recorded
    replayed output lengths only."""
    if not has_prompts(data.get("real_lengths") or {}):
        return (
            "The last two columns simulate each call with the output length the same call had on the real "
            "engines (the cost models alone, without the length sampler's draw)."
        )
    return (
        "The next two columns give each decoding call the prompt length the same call had on the real "
        "engines (the simulated retrieval picks its own chunks, so its prompts differ query by query) and "
        "sample the output lengths; the last two also give each call its real output length (the cost models "
        "alone)."
    )


def has_prompts(per_call: dict[str, Any]) -> bool:
    """Whether a run recorded each call's prompt length (runs before it recorded only outputs)."""
    return any("prompts" in lens for by_q in per_call.values() for lens in by_q.values())


def markdown(data: dict[str, Any], command: str) -> str:
    lines = [
        "## Simulator fidelity: the RAG benchmark measured vs simulated (bench/studies/sim/sim_fidelity.py)",
        "",
        f"Command: `{command}` ({data['wall_s'] / 60:.1f} min). Profile: `{data['profile_path']}` "
        f"({data['profile_source']}). Workload: bench.studies.rag.rag's (TruthfulQA questions over 10 BoolQ "
        f"passages, seed {data['seed']}, {data['n']} queries per trace, its low / high Poisson rates); the "
        f"simulator samples output lengths recorded from {data['n_cal']} other queries per app (seed 1000"
        + (", run as each system runs them" if data.get("cal_per_system") else "")
        + ") on the real engines"
        + (
            f"; the profile's prompt-token estimate scaled by {data['token_scale']:.3f} so those queries' "
            "simulated prompts have as many tokens as their real ones"
            if data.get("token_scale")
            else ""
        )
        + f". Load average before / after: {data['load_before']:.1f} / {data['load_after']:.1f}.",
        "",
        f"The simulated mean is over {data.get('sim_seeds', 1)} length-sampler seed(s) per trace. "
        + replay_text(data),
        "",
    ]
    lines += error_lines(data)
    lines += prompt_lines(data)
    lines += probe_lines(data.get("probes") or {}, data.get("probe_reference"))
    return "\n".join(lines + model_step_lines(data)) + "\n"


def error_lines(data: dict[str, Any]) -> list[str]:
    """Per app, rate and system: measured against simulated (sampled lengths, real prompts, real lengths)
    and their errors, then the mean absolute errors and the points within 15%."""
    errs: dict[str, list[float]] = {"sim": [], "prompted": [], "replay": []}
    rows = []
    for key, real in data["real"].items():
        app, rate, system = key.split("|")
        m = statistics.fmean(real)
        cells = []
        for col in ("sim", "prompted", "replay"):
            if col in data:
                s = statistics.fmean(data[col][key])
                errs[col].append(abs(s - m) / m)
                cells += [num(s, 2), f"{(s - m) / m:+.0%}"]
        rows.append([app, f"{rate} ({RATES[app][rate]} q/s)", system, num(m, 2), *cells])
    prompted = ["simulated, real prompts (s)", "error"] if "prompted" in data else []
    lines = table(
        [
            "app",
            "rate",
            "system",
            "measured mean (s)",
            "simulated mean (s)",
            "error",
            *prompted,
            "simulated, real lengths (s)",
            "error",
        ],
        rows,
        "lll" + "r" * (5 + len(prompted)),
    )
    said = {
        "sim": "Mean absolute error",
        "prompted": "with the real prompt lengths: mean absolute error",
        "replay": "with the real lengths: mean absolute error",
    }
    lines += [
        "",
        "; ".join(
            f"{said[c]} {statistics.fmean(e):.0%}, {sum(x <= 0.15 for x in e)} of {len(e)} points within 15%"
            for c, e in errs.items()
            if e
        )
        + " (the target: every point).",
    ]
    return lines


def model_step_lines(data: dict[str, Any]) -> list[str]:
    """The cost model's decode step against the profile's: measured directly (step_lines) or from its
    batches' differences of two output lengths."""
    lines: list[str] = []
    its = data["iterations"]
    if its and its[0].get("direct"):
        lines += step_lines(data)
    elif its:
        lines += [
            "",
            "Per decode step (vLLM iteration) of the fitted LLM cost model vs measured (from the profile's "
            "own batches: the time difference of two output lengths per extra token"
            + (
                f"; each batch timed {data['repeats']} times, its median kept"
                if data.get("repeats", 1) > 1
                else ""
            )
            + "):",
            "",
            *table(
                ["batch", "prompt tokens", "measured step (ms)", "model step (ms)", "error"],
                (
                    [
                        r["batch"],
                        r["prompt_tokens"],
                        num(r["measured_step_s"] * 1e3),
                        num(r["predicted_step_s"] * 1e3),
                        f"{r['error']:+.0%}",
                    ]
                    for r in its
                    if r["error"] is not None
                ),
                "rrrrr",
            ),
        ]
    return lines
