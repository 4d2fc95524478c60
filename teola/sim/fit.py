"""Fitting simulation cost models to measurements (pure functions; `teola profile` feeds them).

LLM: a measured request batch (B prompts of P tokens decoding N tokens each) took T seconds. The
simulated engine's time for it is linear in the four iteration-cost coefficients, so its feature
vector is the simulated time of the same batch under each unit cost (base=1, prefill_token=1, ...),
computed by running engines.sim.llm's own scheduler in virtual time: chunking under the token
budget and the order of iterations are the same as in the simulation that uses the fit.
Other engines: seconds = base + per_item * n + per_token * tokens + per_padded_token * n * longest
request's tokens per batch (engines.sim.sim_engine.linear_cost: a transformer batch is padded to its longest
text; batches of mixed lengths tell the two token terms apart).
Coefficients are non-negative least squares on relative errors (scipy.optimize.nnls); each LLM
sample keeps its feature vector, so a profile can be refitted offline.
LLM fits also take one row per pair of batches that differ only in output length (same batch size,
prompts within 25% in tokens): their time difference is the batch's decode steps alone. Without it a
short batch's time is mostly prefill, the fit matches totals within a few percent and still misses
the per-step decode time by 30% (`python -m bench plan_real`: 129 vs 99 ms per step at 32 sequences), which is
what an offline job of long decodes spends its time on.
A decoding batch streamed with progress events also yields its iteration time directly
(`steady_steps`: the median time between a request's tokens while every request of the batch
decodes); each such measurement is one more row, an iteration of B sequences over C context tokens
(base + B * decode_seq + C * context_token), and the report compares it with the model.
The step rows also give the decode batch curve (engines.sim.cost; `batch_curve`): a factor per measured
batch size on iterations that only decode, since no linear form follows this machine's step within 10%
at every batch. fit_llm simulates each batch total again under the whole model; fit_llm_rows alone
(an offline refit) leaves the totals' predictions as the linear part's.
"""

from __future__ import annotations

import asyncio
import math
import statistics
from collections.abc import Sequence
from typing import Any

from engines.llm_text.least_squares import nnls
from engines.sim.llm import IterationCost, SimLLM
from engines.sim.text import ASSISTANT_TURN
from teola.sim.virtual_loop import run_virtual

LLM_TERMS = ("base", "prefill_token", "decode_seq", "context_token", "prefill_attention")
LINEAR_TERMS = ("base", "per_item", "per_token", "per_padded_token")


def llm_features(texts: list[str], out_tokens: int, settings: dict[str, Any]) -> list[float]:
    """Simulated seconds of one measured LLM batch under each unit iteration cost (LLM_TERMS order):
    one request per prompt text, each decoding `out_tokens` tokens (a prefill when 0)."""
    return [_simulated(texts, out_tokens, settings, IterationCost(**{t: 1.0})) for t in LLM_TERMS]


def _simulated(texts: list[str], out: int, settings: dict[str, Any], cost: IterationCost) -> float:
    async def main() -> float:
        engine = SimLLM("fit", cost, **settings)
        await engine.start()
        # as in the measurement: an earlier prompt left the chat template's blocks in the prefix cache
        await engine.execute("prefilling", [{"parts": [["question", "warm-up"]], "max_tokens": 1}])
        reqs = [{"parts": [["question", t]], "max_tokens": max(out, 1), "ignore_eos": True} for t in texts]
        loop = asyncio.get_running_loop()
        start = loop.time()
        await engine.execute("decoding" if out else "prefilling", reqs)
        took = loop.time() - start
        await engine.stop()
        return took

    return run_virtual(main())


def fit_tokens(samples: list[tuple[int, int]]) -> tuple[float, int]:
    """(counted words and marks, real prompt tokens) pairs -> (token_ratio, template_tokens)."""
    rows = [[float(w), 1.0] for w, _ in samples]
    ratio, template = nnls(rows, [float(t) for _, t in samples])
    return round(ratio, 4), max(0, round(template) - len(ASSISTANT_TURN))


def fit_llm(
    samples: list[dict[str, Any]], settings: dict[str, Any]
) -> tuple[dict[str, float], dict[str, Any]]:
    """samples: {"texts": [prompt, ...], "out_tokens", "seconds"} (one measured batch each; "runs",
    the timings a repeated batch's median "seconds" came from, is kept in the report). Returns
    the cost dict and the fit's report (per-sample relative errors, mean absolute error)."""
    rows = [llm_features(s["texts"], s["out_tokens"], settings) for s in samples]
    brief = [
        {
            "batch": len(s["texts"]),
            "prompt_tokens": s.get("prompt_tokens"),
            "out_tokens": s["out_tokens"],
            "features": [round(x, 6) for x in row],
            "seconds": s["seconds"],
        }
        | ({"runs": s["runs"]} if "runs" in s else {})
        | ({"steps": s["steps"]} if s.get("steps") else {})
        for s, row in zip(samples, rows)
    ]
    cost, report = fit_llm_rows(brief)
    if cost.get("decode_batch_factor"):
        # the curve scales decode-only iterations, so each batch total is simulated again under the
        # whole model; the linear part's prediction stays in "linear_s"
        full = IterationCost(**cost)
        for s, e in zip(samples, report["samples"]):
            e["linear_s"], e["predicted_s"] = (
                e["predicted_s"],
                round(_simulated(s["texts"], s["out_tokens"], settings, full), 5),
            )
            e["error"] = (
                round((e["predicted_s"] - e["measured_s"]) / e["measured_s"], 4)
                if e["measured_s"] > 0
                else 0.0
            )
        report["mean_abs_error"] = round(statistics.fmean(abs(e["error"]) for e in report["samples"]), 4)
    return cost, report


def decode_pairs(samples: list[dict[str, Any]]) -> list[tuple[int, int]]:
    """(shorter, longer) index pairs of decoding batches that differ only in output length: same batch
    size, both decoding, prompts within 25% in tokens (unknown prompt sizes: same batch suffices)."""
    pairs = []
    for i, a in enumerate(samples):
        for j in range(i + 1, len(samples)):
            b = samples[j]
            if (
                a["batch"] != b["batch"]
                or min(a["out_tokens"], b["out_tokens"]) <= 0
                or a["out_tokens"] == b["out_tokens"]
            ):
                continue
            pa, pb = a.get("prompt_tokens"), b.get("prompt_tokens")
            if pa and pb and abs(pa - pb) > 0.25 * max(pa, pb):
                continue
            pairs.append((i, j) if a["out_tokens"] < b["out_tokens"] else (j, i))
    return pairs


def steady_steps(
    events: Sequence[tuple[float, int, int]], prompt_tokens: Sequence[int]
) -> dict[str, Any] | None:
    """The decode iteration time of one streamed batch: events are (seconds, request index, tokens
    decoded so far). Only the window in which every request decodes counts (after the last first
    token, before the first request's last token): there each iteration decodes the whole batch. A
    gap over k tokens (outputs the client read late come merged) counts as k iterations of gap / k.
    Returns the median per-token gap, the batch's context tokens during the window (prompt plus
    tokens decoded, summed over requests, averaged over the window) and the gaps it used; None when
    the window holds fewer than 3 gaps."""
    per: dict[int, list[tuple[float, int]]] = {}
    for t, i, n in sorted(events):
        per.setdefault(i, []).append((t, n))
    if not per or len(per) < len(prompt_tokens):
        return None
    start, end = max(e[0][0] for e in per.values()), min(e[-1][0] for e in per.values())
    gaps: list[float] = []
    context = 0.0
    for i, seq in per.items():
        ctx = [
            (prompt_tokens[i] + n1, (t2 - t1) / (n2 - n1), n2 - n1)
            for (t1, n1), (t2, n2) in zip(seq, seq[1:])
            if t1 >= start and t2 <= end and n2 > n1
        ]
        for _, gap, k in ctx:
            gaps.extend([gap] * k)
        context += statistics.fmean(c for c, _, _ in ctx) if ctx else prompt_tokens[i]
    if len(gaps) < 3:
        return None
    return {"step_s": statistics.median(gaps), "context_tokens": context, "gaps": len(gaps)}


def step_row(steps: dict[str, Any]) -> list[float]:
    """Unit-cost features (LLM_TERMS order) of one decode iteration of `steps` (steady_steps' dict
    with its "decode_seqs")."""
    return [1.0, 0.0, float(steps["decode_seqs"]), float(steps["context_tokens"]), 0.0]


def fit_llm_rows(samples: list[dict[str, Any]]) -> tuple[dict[str, float], dict[str, Any]]:
    """Fit from samples that carry their "features" (fit_llm's, or a stored profile's report, whose
    samples say "measured_s": refitting needs no engine). The report has every sample's error and,
    per decode pair, the measured and predicted seconds of its extra decode steps."""

    def secs(s: dict[str, Any]) -> float:
        return float(s["seconds"] if "seconds" in s else s["measured_s"])

    rows = [list(s["features"]) for s in samples]
    y = [secs(s) for s in samples]
    pairs = [(i, j) for i, j in decode_pairs(samples) if y[j] > y[i]]  # a noise-inverted pair says nothing
    diff = [[hi - lo for hi, lo in zip(rows[j], rows[i])] for i, j in pairs]
    stepped = [s for s in samples if s.get("steps")]
    coef = nnls(
        rows + diff + [step_row(s["steps"]) for s in stepped],
        y + [y[j] - y[i] for i, j in pairs] + [float(s["steps"]["step_s"]) for s in stepped],
        relative=True,
    )
    brief = [
        {k: v for k, v in s.items() if k not in ("measured_s", "predicted_s", "error")} | {"seconds": secs(s)}
        for s in samples
    ]
    report = _report(rows, coef, brief)
    report["decode_steps"] = [
        {
            "batch": samples[j]["batch"],
            "out_tokens": [samples[i]["out_tokens"], samples[j]["out_tokens"]],
            "measured_s": round(y[j] - y[i], 5),
            "predicted_s": round(sum(c * x for c, x in zip(coef, d)), 5),
        }
        for (i, j), d in zip(pairs, diff)
    ]
    report["steps"] = []
    for s in stepped:
        measured, predicted = (
            float(s["steps"]["step_s"]),
            sum(c * x for c, x in zip(coef, step_row(s["steps"]))),
        )
        report["steps"].append(
            {
                "batch": s["batch"],
                "prompt_tokens": s.get("prompt_tokens"),
                "out_tokens": s["out_tokens"],
                **s["steps"],
                "measured_s": round(measured, 6),
                "linear_s": round(predicted, 6),
            }
        )
    cost: dict[str, Any] = dict(zip(LLM_TERMS, coef))
    curve = batch_curve(report["steps"])
    if curve:
        cost["decode_batch_factor"] = curve
    _score_steps(report["steps"], dict(curve))
    return cost, report


def batch_curve(steps: list[dict[str, Any]]) -> list[list[float]]:
    """The decode batch curve (engines.sim.cost) from streamed step measurements ("batch",
    "measured_s", "linear_s": the linear part's prediction): per measured batch size, the geometric
    mean of measured over predicted, each row weighted by the token gaps its median came from (a
    short output's window holds few). [] without usable measurements."""
    logs: dict[int, list[tuple[float, float]]] = {}
    for r in steps:
        if r.get("measured_s", 0) > 0 and r.get("linear_s", 0) > 0:
            w = float(r.get("gaps") or 1)
            logs.setdefault(int(r["batch"]), []).append((math.log(r["measured_s"] / r["linear_s"]), w))
    return [
        [b, round(math.exp(sum(x * w for x, w in v) / sum(w for _, w in v)), 4)]
        for b, v in sorted(logs.items())
    ]


def _score_steps(steps: list[dict[str, Any]], curve: dict[int, float]) -> None:
    """Each step row's prediction under the fitted model (linear part x its batch's factor) and its
    error, which is in sample: the factor came from these rows. "held_out_error" takes the factor from
    the same batch's rows at other prompt sizes (over 25% apart) alone; None when there are none."""
    for r in steps:
        m = r["measured_s"]
        r["predicted_s"] = round(r["linear_s"] * curve.get(r["batch"], 1.0), 6)
        r["error"] = round((r["predicted_s"] - m) / m, 4) if m > 0 else None
        others = [
            o
            for o in steps
            if o["batch"] == r["batch"]
            and o.get("prompt_tokens")
            and r.get("prompt_tokens")
            and abs(o["prompt_tokens"] - r["prompt_tokens"])
            > 0.25 * max(o["prompt_tokens"], r["prompt_tokens"])
        ]
        held = dict(batch_curve(others)).get(r["batch"]) if others else None
        r["held_out_error"] = round((r["linear_s"] * held - m) / m, 4) if held and m > 0 else None


def fit_linear(samples: list[dict[str, Any]]) -> tuple[dict[str, float], dict[str, Any]]:
    """samples: {"items", "tokens", "seconds"} per measured batch, and "padded" (items x the longest
    request's tokens; taken as "tokens" when absent, which leaves the two token terms one)."""
    rows = [
        [1.0, float(s["items"]), float(s["tokens"]), float(s.get("padded", s["tokens"]))] for s in samples
    ]
    if all(r[2] == r[3] for r in rows):  # no batch of unequal texts: the padded term cannot be told apart
        coef = nnls([r[:3] for r in rows], [s["seconds"] for s in samples], relative=True) + [0.0]
    else:
        coef = nnls(rows, [s["seconds"] for s in samples], relative=True)
    return dict(zip(LINEAR_TERMS, coef)), _report(rows, coef, samples)


def _report(rows: list[list[float]], coef: list[float], samples: list[dict[str, Any]]) -> dict[str, Any]:
    errors = []
    for row, s in zip(rows, samples):
        predicted = sum(c * x for c, x in zip(coef, row))
        errors.append(
            {
                **{k: v for k, v in s.items() if k != "seconds"},
                "measured_s": round(s["seconds"], 5),
                "predicted_s": round(predicted, 5),
                "error": round((predicted - s["seconds"]) / s["seconds"], 4) if s["seconds"] > 0 else 0.0,
            }
        )
    return {"samples": errors, "mean_abs_error": round(statistics.fmean(abs(e["error"]) for e in errors), 4)}
