"""Fitting simulation cost models to measurements (pure functions; `teola profile` feeds them).

LLM: a measured request batch (B prompts of P tokens decoding N tokens each) took T seconds. The
simulated engine's time for it is linear in the four iteration-cost coefficients, so its feature
vector is the simulated time of the same batch under each unit cost (base=1, prefill_token=1, ...),
computed by running engines.sim_llm's own scheduler in virtual time: chunking under the token
budget and the order of iterations are the same as in the simulation that uses the fit.
Other engines: seconds = base + per_item * n + per_token * tokens + per_padded_token * n * longest
request's tokens per batch (engines.sim_engine.linear_cost: a transformer batch is padded to its longest
text; batches of mixed lengths tell the two token terms apart).
Coefficients are non-negative least squares on relative errors (a negative one is dropped and the
rest refitted); each LLM sample keeps its feature vector, so a profile can be refitted offline.
"""
from __future__ import annotations

import asyncio
import statistics
from typing import Any, Sequence

import numpy as np

from engines.sim_llm import IterationCost, SimLLM
from teola.sim.virtual_loop import run_virtual

LLM_TERMS = ("base", "prefill_token", "decode_seq", "context_token", "prefill_attention")
LINEAR_TERMS = ("base", "per_item", "per_token", "per_padded_token")


def nnls(rows: Sequence[Sequence[float]], y: Sequence[float], relative: bool = False) -> list[float]:
    """Least squares with coefficients >= 0 (drop the most negative and refit, until none is).
    relative: minimise relative rather than absolute errors (each row weighted by 1 / y), so a
    few long measurements do not outweigh many short ones."""
    a, b = np.asarray(rows, dtype=float), np.asarray(y, dtype=float)
    if relative:
        w = 1.0 / np.maximum(b, 1e-12)
        a, b = a * w[:, None], b * w
    active = list(range(a.shape[1]))
    while active:
        coef, *_ = np.linalg.lstsq(a[:, active], b, rcond=None)
        if coef.min() >= 0:
            out = [0.0] * a.shape[1]
            for j, c in zip(active, coef):
                out[j] = float(c)
            return out
        active.pop(int(np.argmin(coef)))
    return [0.0] * a.shape[1]


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
    return round(ratio, 4), max(0, round(template) - 3)  # 3: the sim's assistant-turn tokens


def fit_llm(samples: list[dict[str, Any]], settings: dict[str, Any]) -> tuple[dict[str, float], dict[str, Any]]:
    """samples: {"texts": [prompt, ...], "out_tokens", "seconds"} (one measured batch each). Returns
    the cost dict and the fit's report (per-sample relative errors, mean absolute error)."""
    rows = [llm_features(s["texts"], s["out_tokens"], settings) for s in samples]
    coef = nnls(rows, [s["seconds"] for s in samples], relative=True)
    brief = [{"batch": len(s["texts"]), "prompt_tokens": s.get("prompt_tokens"), "out_tokens": s["out_tokens"],
              "features": [round(x, 6) for x in row], "seconds": s["seconds"]} for s, row in zip(samples, rows)]
    return dict(zip(LLM_TERMS, coef)), _report(rows, coef, brief)


def fit_linear(samples: list[dict[str, Any]]) -> tuple[dict[str, float], dict[str, Any]]:
    """samples: {"items", "tokens", "seconds"} per measured batch, and "padded" (items x the longest
    request's tokens; taken as "tokens" when absent, which leaves the two token terms one)."""
    rows = [[1.0, float(s["items"]), float(s["tokens"]), float(s.get("padded", s["tokens"]))] for s in samples]
    if all(r[2] == r[3] for r in rows):  # no batch of unequal texts: the padded term cannot be told apart
        coef = nnls([r[:3] for r in rows], [s["seconds"] for s in samples], relative=True) + [0.0]
    else:
        coef = nnls(rows, [s["seconds"] for s in samples], relative=True)
    return dict(zip(LINEAR_TERMS, coef)), _report(rows, coef, samples)


def _report(rows: list[list[float]], coef: list[float], samples: list[dict[str, Any]]) -> dict[str, Any]:
    errors = []
    for row, s in zip(rows, samples):
        predicted = sum(c * x for c, x in zip(coef, row))
        errors.append({**{k: v for k, v in s.items() if k != "seconds"}, "measured_s": round(s["seconds"], 5),
                       "predicted_s": round(predicted, 5),
                       "error": round((predicted - s["seconds"]) / s["seconds"], 4) if s["seconds"] > 0 else 0.0})
    return {"samples": errors, "mean_abs_error": round(statistics.fmean(abs(e["error"]) for e in errors), 4)}
