"""Which per-iteration LLM cost form do the measured decode steps support? (issue 17; analysis only)

Offline, no engine: the profiles `teola profile` measured with streamed decode steps
(bench/results/sim/*_profile.json) are refitted under other forms of the decode part of an iteration
of B sequences over C context tokens:
  linear   decode_seq * B + context_token * C            (engines/sim/cost.py today)
  concave  decode_seq * B**alpha                         (alpha 0.3..1 on a grid: GEMM efficiency grows with
  B) ctx*B^g  context_token * C * B**gamma                  (gamma 0..1: a batch-dependent attention cost)
  knee     piecewise linear in B (knee at 2, 4 or 8)
each with base, prefill_token and prefill_attention as today, and fitted three ways: teola.sim.fit's
rows (batch totals, decode pairs, direct steps; relative NNLS), the same without the decode pairs,
and with a Huber loss on relative errors (k = 0.1, iteratively reweighted). A form's parameter
(alpha, gamma, knee) is chosen per profile on the rows fitted. Every profiled batch is replayed on
engines.sim.llm's scheduler (prompts rebuilt as teola.sim.profiler builds them) for its iterations'
work, so a form's features are summed per batch as fit_llm does for the linear one.
Scored on each profile's 8 out=40 step shapes (bench.studies.sim.sim_fidelity's table), in-sample and held out
(the fit without those 8 step measurements; the out=8 steps of the same shapes, other runs, stay).

    python -m bench cost_forms
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections.abc import Callable
from typing import Any

import numpy as np

from bench.lib.results import results_dir, write_results
from bench.lib.tables import num, pct, table
from engines.sim.cost import IterationCost
from engines.sim.llm import SimLLM
from teola.sim.fit import decode_pairs, nnls
from teola.sim.profile_batches import prose as _prose
from teola.sim.virtual_loop import run_virtual

PROFILES = (
    "sim_fidelity_device",
    "sim_fidelity_steps",
    "sim_fidelity_memo",
    "sim_trace_diff_avx2",
    "sim_trace_diff_load",
)
SETTINGS = (
    "token_ratio",
    "template_tokens",
    "max_num_seqs",
    "max_num_batched_tokens",
    "max_model_len",
    "block_size",
)
Phi = Callable[
    [float, float, float, float], list[float]
]  # (prefill tok, decode seqs, context, pairs) -> features


def _lin(p: float, d: float, c: float, q: float) -> list[float]:
    return [1.0, p, d, c, q / 1000]


FORMS: dict[str, tuple[list, Callable[[Any], Phi]]] = {
    "linear": ([None], lambda _: _lin),
    "concave": (
        [round(a, 2) for a in np.arange(0.3, 1.001, 0.05)],
        lambda a: lambda p, d, c, q: [1.0, p, d**a, c, q / 1000],
    ),
    "ctx*B^g": (
        [round(g, 1) for g in np.arange(0.0, 1.001, 0.1)],
        lambda g: lambda p, d, c, q: [1.0, p, d, c * d**g if d else 0.0, q / 1000],
    ),
    "knee": ([2, 4, 8], lambda k: lambda p, d, c, q: [1.0, p, min(d, k), max(d - k, 0), c, q / 1000]),
}


def replay(profile: dict[str, Any]) -> list[dict[str, Any]]:
    """The profile's LLM samples, each with "it": its batch's iterations as (prefill tokens, decoding
    sequences, their context tokens, prefill pairs), replayed on the simulated engine."""
    v = profile["engines"]["vllm"]
    salt = iter(range(1, 10_000))  # 0 was the warm-up prompt
    batches = [([_prose(w, next(salt))], 0) for w in (30, 150, 400, 800, 1200) for _ in range(2)]
    for b in sorted({1, 2, 4, v["max_num_seqs"]}):
        for words in (30, 400):
            texts = [_prose(words, next(salt)) for _ in range(b)]
            batches += [(texts, out) for out in (8, 40)]
    out = []
    for (texts, n), s in zip(batches, v["fit"]["samples"], strict=True):
        it = _iterations(texts, n, {k: v[k] for k in SETTINGS})
        assert abs(len(it) - s["features"][0]) < 1e-6, "the replay must match the profile's own features"
        out.append({**s, "it": it})
    return out


def _iterations(texts: list[str], out: int, settings: dict[str, Any]) -> list[tuple]:
    seen: list[tuple] = []

    class Recorder(IterationCost):
        def seconds(self, p: int, d: int, c: int, q: float = 0.0) -> float:
            seen.append((p, d, c, q))
            return 1.0

    async def scenario() -> list[tuple]:
        engine = SimLLM("fit", Recorder(), **settings)
        await engine.start()
        await engine.execute("prefilling", [{"parts": [["question", "warm-up"]], "max_tokens": 1}])
        seen.clear()
        await engine.execute(
            "decoding" if out else "prefilling",
            [{"parts": [["question", t]], "max_tokens": max(out, 1), "ignore_eos": True} for t in texts],
        )
        await engine.stop()
        return list(seen)

    return run_virtual(scenario())


def rows(samples: list[dict[str, Any]], phi: Phi, pairs: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """teola.sim.fit.fit_llm_rows' rows under feature map phi: batch totals, decode pairs, steps."""
    tot = [np.sum([phi(*i) for i in s["it"]], axis=0) for s in samples]
    y = [s["measured_s"] for s in samples]
    a, b = list(tot), list(y)
    if pairs:
        for i, j in decode_pairs(samples):
            if y[j] > y[i]:
                a.append(tot[j] - tot[i])
                b.append(y[j] - y[i])
    for s in samples:
        if s.get("steps"):
            a.append(phi(0, s["steps"]["decode_seqs"], s["steps"]["context_tokens"], 0))
            b.append(s["steps"]["step_s"])
    return np.array(a, float), np.array(b, float)


def fit(samples: list[dict[str, Any]], phi: Phi, how: str) -> np.ndarray:
    """Coefficients under phi: how = "fit.py" (today's rows), "no pairs", or "huber"."""
    a, b = rows(samples, phi, pairs=how != "no pairs")
    if how != "huber":
        return np.array(nnls(a, b, relative=True))
    w = np.ones(len(b))
    for _ in range(30):
        sw = np.sqrt(w)
        coef = np.array(nnls(a / b[:, None] * sw[:, None], sw))
        err = np.abs(a @ coef - b) / b
        w = np.where(err <= 0.1, 1.0, 0.1 / np.maximum(err, 1e-12))
    return coef


def errors(samples: list[dict[str, Any]], phi: Phi, coef: np.ndarray) -> tuple[list[float], list[float]]:
    """Relative errors of the batch totals and of every direct step measurement."""
    tot = [
        (float(np.dot(coef, np.sum([phi(*i) for i in s["it"]], axis=0))) - s["measured_s"]) / s["measured_s"]
        for s in samples
    ]
    st = [
        (
            float(np.dot(coef, phi(0, s["steps"]["decode_seqs"], s["steps"]["context_tokens"], 0)))
            - s["steps"]["step_s"]
        )
        / s["steps"]["step_s"]
        for s in samples
        if s.get("steps")
    ]
    return tot, st


def evaluate(samples: list[dict[str, Any]], form: str, how: str, held_out: bool) -> dict[str, Any]:
    """Fit (choosing the form's parameter on the fitted rows) and score the out=40 step shapes."""
    train = [dict(s, steps=None) if held_out and s["out_tokens"] == 40 else s for s in samples]
    grid, make = FORMS[form]

    def sse(p: Any) -> float:
        tot, st = errors(train, make(p), fit(train, make(p), how))
        return sum(e * e for e in tot + st)

    param = min(grid, key=sse) if len(grid) > 1 else grid[0]
    phi = make(param)
    coef = fit(train, phi, how)
    tot, _ = errors(samples, phi, coef)
    shapes = [s for s in samples if s.get("steps") and s["out_tokens"] == 40]
    pred = [
        float(np.dot(coef, phi(0, s["steps"]["decode_seqs"], s["steps"]["context_tokens"], 0)))
        for s in shapes
    ]
    return {
        "param": param,
        "prefill_errors": [e for e, s in zip(tot, samples) if s["out_tokens"] == 0],
        "shapes": [
            {
                "batch": s["batch"],
                "prompt_tokens": s["prompt_tokens"],
                "context_tokens": s["steps"]["context_tokens"],
                "measured_s": s["steps"]["step_s"],
                "predicted_s": p,
                "error": (p - s["steps"]["step_s"]) / s["steps"]["step_s"],
            }
            for s, p in zip(shapes, pred)
        ],
    }


def replicate_ceiling(samples: list[dict[str, Any]]) -> list[float]:
    """Per shape, the out=8 run's step as a prediction of the out=40 run's (the same batch, 32 tokens
    less context per sequence): how well the measurement agrees with itself."""
    by = {
        (s["batch"], s["prompt_tokens"] // 100, s["out_tokens"]): s["steps"]["step_s"]
        for s in samples
        if s.get("steps")
    }
    return [by[(b, p, 8)] / v - 1 for (b, p, o), v in by.items() if o == 40 and (b, p, 8) in by]


def markdown(res: dict[str, Any], ceiling: list[float], old: dict[str, list[dict]]) -> str:
    n = len(ceiling)
    lines = [
        "## Decode-step cost forms against the measured steps (bench/studies/sim/cost_forms.py; offline, "
        "stored profiles)",
        "",
        f"Profiles: {', '.join(f'`{p}_profile.json`' for p in PROFILES)} (8 out=40 step shapes each, 40 in "
        "all). Replicate ceiling: the out=8 run's step is within 10% of the out=40 run's of the same shape "
        f"for {sum(abs(e) <= 0.1 for e in ceiling)} of {n} shapes (max {max(map(abs, ceiling)):.0%}).",
        "",
    ]
    rows = []
    for (form, how), r in res.items():
        cells = []
        for held in (False, True):
            e = [abs(x["error"]) for p in PROFILES for x in r[held][p]["shapes"]]
            cells += [f"{sum(x <= 0.1 for x in e)}/{len(e)}", f"{statistics.fmean(e):.1%} / {max(e):.0%}"]
        pre = statistics.fmean(abs(x) for p in PROFILES for x in r[False][p]["prefill_errors"])
        rows.append([form, how, *cells, pct(pre, 1)])
    lines += table(
        [
            "form",
            "fit",
            "steps within 10%, in-sample",
            "mean abs / max",
            "held out",
            "mean abs / max",
            "prefill mean abs error",
        ],
        rows,
        "llrrrrr",
    )
    for p in PROFILES:
        lines += ["", f"`{p}`: step (ms) measured, stored model, and refits (in-sample / held out)", ""]
        rows = []
        for i, x in enumerate(res[SHOWN[0]][False][p]["shapes"]):
            m, o = x["measured_s"], old[p][i]
            cells = [f"{o * 1e3:.1f} ({(o - m) / m:+.0%})"]
            for key in SHOWN:
                a, b = (res[key][h][p]["shapes"][i]["predicted_s"] for h in (False, True))
                cells.append(f"{a * 1e3:.1f} ({(a - m) / m:+.0%}) / {b * 1e3:.1f} ({(b - m) / m:+.0%})")
            rows.append([x["batch"], x["prompt_tokens"], f"{x['context_tokens']:,}", num(m * 1e3), *cells])
        lines += table(
            ["batch", "prompt", "context", "measured", "stored model", *(f"{f}, {h}" for f, h in SHOWN)],
            rows,
            "r" * (5 + len(SHOWN)),
        )
        lines.append("")
        lines.append(
            "parameter in-sample / held out: "
            + "; ".join(
                f"{f}, {h}: {res[(f, h)][False][p]['param']} / {res[(f, h)][True][p]['param']}"
                for f, h in SHOWN
            )
        )
    return "\n".join(lines)


SHOWN = (("concave", "fit.py"), ("linear", "huber"))


def add_arguments(p: argparse.ArgumentParser) -> None:
    """`python -m bench cost_forms` has no options of its own."""


def run_cli(args: argparse.Namespace, argv: list[str], p: argparse.ArgumentParser) -> None:
    """Run the study (`python -m bench cost_forms`): offline, on the stored profiles."""
    profiles = {p: json.loads((results_dir("sim") / f"{p}_profile.json").read_text()) for p in PROFILES}
    samples = {p: replay(d) for p, d in profiles.items()}
    res = {
        (f, h): {held: {p: evaluate(samples[p], f, h, held) for p in PROFILES} for held in (False, True)}
        for f in FORMS
        for h in ("fit.py", "no pairs", "huber")
    }
    old = {
        p: [r["predicted_s"] for r in d["engines"]["vllm"]["fit"]["steps"] if r["out_tokens"] == 40]
        for p, d in profiles.items()
    }
    ceiling = [e for p in PROFILES for e in replicate_ceiling(samples[p])]
    data = {
        "results": [
            {
                "form": f,
                "fit": h,
                "held_out": held,
                "profile": p,
                "param": r["param"],
                "prefill_mean_abs_error": round(statistics.fmean(abs(e) for e in r["prefill_errors"]), 4),
                "step_errors": [round(x["error"], 4) for x in r["shapes"]],
            }
            for (f, h), v in res.items()
            for held, per in v.items()
            for p, r in per.items()
        ],
        "replicate_ceiling": [round(e, 4) for e in ceiling],
    }
    write_results("cost_forms", data, markdown(res, ceiling, old), subject="sim")
