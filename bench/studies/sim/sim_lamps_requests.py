"""The requests of the LAMPS studies (bench.studies.sim.sim_lamps, bench.studies.programs.lamps_real):
API-augmented requests of INFERCEPT's and ToolBench's mixes with Poisson arrivals, lognormal segment
lengths and API durations, and the lengths SJF and LAMPS are told (the truth, or the truth times a
measured predictor's error)."""

from __future__ import annotations

import math
import random
from pathlib import Path
from typing import Any

MIXES = {
    "infercept": {
        "math": ((9e-5, 6e-5), (3.75, 1.3)),
        "qa": ((0.69, 0.17), (2.52, 1.73)),
        "ve": ((0.09, 0.014), (28.18, 15.2)),
        "chatbot": ((28.6, 15.6), (4.45, 1.96)),
        "image": ((20.03, 7.8), (6.91, 3.93)),
        "tts": ((17.24, 7.6), (6.91, 3.93)),
    },
    "toolbench": {"toolbench": ((1.72, 3.33), (2.45, 1.81))},
}
# LAMPS' single-API dataset (its §6.2: "a subset of the INFERCEPT dataset containing only a single API"; in
# LAMPS' released runs every request of it pauses once): the INFERCEPT types, one API call per request
MIXES["single"] = {kind: (duration, (1.0, 0.0)) for kind, (duration, _calls) in MIXES["infercept"].items()}
RESPONSE_TOKENS = {"math": 8, "qa": 48, "ve": 24, "chatbot": 40, "image": 12, "tts": 8, "toolbench": 96}
OUT_MEAN = 40


def prediction_ratios(path: str) -> list[float]:
    """Predicted / actual output length of every held-out row of a bench.studies.programs.length_predictor run
    (its JSON, "holdout": [[actual, predicted], ...]): the predictor's measured error, to apply to the
    simulated segments' lengths (`predicted`)."""
    import json

    file = Path(path)
    if not file.is_file():
        raise SystemExit(
            f"sim_lamps: --predictions {path}: no such file (run python -m bench length_predictor)"
        )
    rows = json.loads(file.read_text()).get("holdout") or []
    ratios = [float(b) / a for a, b in rows if a > 0]
    if not ratios:
        raise SystemExit(
            f"sim_lamps: --predictions {path} holds no held-out predictions (rerun python -m bench "
            "length_predictor)"
        )
    return ratios


def predicted(tokens: int, key: str, ratios: list[float] | None) -> int:
    """The length SJF and LAMPS are told for a segment of `tokens`: the truth without `ratios`, else
    the truth times one held-out ratio drawn by `key` (the same draw for every system)."""
    if not ratios:
        return tokens
    return max(1, round(tokens * random.Random(key).choice(ratios)))


def lognormal_params(mean: float, std: float) -> tuple[float, float]:
    """(mu, sigma) of the lognormal with this mean and standard deviation (mean > 0)."""
    sigma2 = math.log(1 + (std / mean) ** 2)
    return math.log(mean) - sigma2 / 2, math.sqrt(sigma2)


def requests(
    mix: str,
    n: int,
    rate: float,
    max_len: int,
    seed: int,
    types: dict[str, Any] | None = None,
    out_cap: int = 256,
    length_scale: float = 1.0,
    sigma: float = 0.8,
) -> list[dict[str, Any]]:
    """n requests with Poisson arrivals at `rate` per second (see the module docstring); `types`
    replaces the mix's API types (name -> ((duration mean, std), (calls mean, std))), `out_cap`
    the largest segment; `length_scale` multiplies prompt words and segment tokens (mean and cap; the
    same draws, so 1.0 is the default workload), and a request's segments are then cut to fit
    `max_len` if they must; `sigma` is the segments' lognormal shape (their spread; the mean stays)."""
    rng = random.Random(f"{mix}:{seed}")
    types = MIXES[mix] if types is None else types
    t, out = 0.0, []
    mu = math.log(OUT_MEAN * length_scale) - sigma * sigma / 2
    cap = round(out_cap * length_scale)
    for i in range(n):
        t += rng.expovariate(rate)
        kind = rng.choice(sorted(types))
        (d_mean, d_std), (k_mean, k_std) = types[kind]
        words = min(
            round(rng.randint(100, 400) * length_scale), int((max_len - 400) / 1.3)
        )  # the prompt fits
        k = max(1, round(rng.gauss(k_mean, k_std)))
        segs = [min(cap, max(4, round(rng.lognormvariate(mu, sigma)))) for _ in range(k + 1)]
        budget = max_len - 1.3 * words - 128  # words and response words count ~1.3 tokens; template tokens
        while k > 1 and sum(segs) + 1.3 * k * RESPONSE_TOKENS.get(kind, 48) > budget:
            k -= 1
            segs.pop()
        room = budget - 1.3 * k * RESPONSE_TOKENS.get(kind, 48)
        if sum(segs) > room:  # one call still too long for the model (long prompts): shorten its segments
            segs = [max(4, int(s * room / sum(segs))) for s in segs]
        # lognormal with the table's moments: a Normal(mean, std) clipped at 0 averages more than the
        # table's mean when std is large (ToolBench's 1.72 s: 2.36 s), while INFERCEPT's handling is given
        # the table's mean and LAMPS learns the durations' own (issue 18). One gauss draw each, as before,
        # so the other draws of the stream are unchanged.
        d_mu, d_sigma = lognormal_params(d_mean, d_std)
        apis = [math.exp(d_mu + d_sigma * rng.gauss(0.0, 1.0)) for _ in range(k)]
        out.append(
            {"id": f"r{i}", "arrival": t, "type": kind, "words": words, "segments": segs, "apis": apis}
        )
    return out


def arriving(
    mix: str,
    rate: float,
    horizon: float,
    max_model_len: int,
    seed: int,
    types: dict[str, Any],
    setup: dict[str, Any],
) -> list[dict[str, Any]]:
    """The requests of `mix` arriving at `rate` before `horizon` (lengths scaled and spread as `setup`
    says)."""
    return [
        r
        for r in requests(
            mix,
            math.ceil(rate * horizon * 1.2) + 50,
            rate,
            max_model_len,
            seed,
            types=types,
            length_scale=setup["length_scale"],
            sigma=setup["sigma"],
        )
        if r["arrival"] < horizon
    ]


def segment_call(
    r: dict[str, Any],
    j: int,
    parts: list[list[str]],
    cont: list[Any],
    handlings: list[str],
    costs: dict[str, Any],
    t0: float,
) -> dict[str, Any]:
    """The call of request `r`'s segment `j`: its prompt parts and the continuation so far, its predicted
    length, whether it resumes a preserved pause, and (but the last) the API call it pauses for."""
    segs = r["segments"]
    req = {
        "parts": parts,
        "complete": True,
        "max_tokens": segs[j],
        "ignore_eos": True,
        "continuation": list(cont),
        "kv_key": r["id"],
        "predicted_tokens": predicted(segs[j], f"{r['id']}-{j}", costs.get("ratios")),
        "request_arrival": t0,
    }
    if handlings and handlings[-1] == "preserve":  # as teola.api.tool_calls marks it: its KV waits for it
        req["resumes_preserved"] = True
    if j < len(segs) - 1:
        req.update(
            api=r["type"],
            post_tokens=predicted(segs[j + 1], f"{r['id']}-{j + 1}", costs.get("ratios")),
            api_response_tokens=RESPONSE_TOKENS[r["type"]],
        )
    return req
