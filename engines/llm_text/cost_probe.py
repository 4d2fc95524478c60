"""The costs an LLM engine reports, fitted at start from a short probe through its own `execute`.

A small, fast version of `teola profile` (teola.sim.profiler), fitted by the same non-negative least
squares on relative errors (engines.llm_text.least_squares): after one warm-up request (it caches
the chat template's blocks), three prefill-only requests of different lengths and one short decode
(EOS ignored), each prompt unique at its front so nothing else is cached. A request that prefills n
new tokens and outputs k tokens is modelled as

    seconds = request_s + n * prefill_token_s + (k - 1) * decode_step_s

(the first token comes with the prefill). Four samples, three unknowns: the fit's mean absolute
relative error is kept (`EngineCosts.error`), as is the probe's own time. On this machine's vLLM with
SmolLM2-135M it takes under a second of engine time. The remote adapter runs the same probe against
its server, so request_s holds the network's round trip too."""

from __future__ import annotations

import asyncio
import statistics
import uuid
from typing import Any

from engines.llm_text.costs import FITTED, EngineCosts, check_costs_option, profile_costs
from engines.llm_text.least_squares import nnls
from engines.requests import PrimOp

PREFILL_WORDS = (8, 24, 56)  # prompt lengths of the prefill-only requests
DECODE_WORDS, DECODE_TOKENS = 8, 5  # the decode: a short prompt, a few steps
_WORDS = (
    "the",
    "river",
    "carries",
    "cold",
    "water",
    "past",
    "old",
    "stone",
    "mills",
    "while",
    "farmers",
    "count",
    "grain",
    "in",
    "quiet",
    "barns",
    "near",
    "a",
    "market",
    "town",
    "where",
    "bells",
    "ring",
)


def probe_text(words: int, salt: str) -> str:
    """`words` words of plain prose, unique from its first token on (`salt`)."""
    body = [_WORDS[(i * 7 + len(salt)) % len(_WORDS)] for i in range(words)]
    return f"{salt}: " + " ".join(body)


def request(words: int, salt: str, out_tokens: int) -> dict[str, Any]:
    return {
        "parts": [["question", probe_text(words, salt)]],
        "max_tokens": out_tokens,
        "ignore_eos": True,
        "temperature": 0.0,
    }


def fit(samples: list[tuple[int, int, float]], block_size: int, probe_s: float) -> EngineCosts:
    """(new prompt tokens, output tokens, seconds) per request -> the engine's costs."""
    rows = [[1.0, float(n), float(max(k - 1, 0))] for n, k, _ in samples]
    y = [s for _, _, s in samples]
    request_s, prefill_s, decode_s = nnls(rows, y, relative=True)
    errors = [abs(request_s + prefill_s * r[1] + decode_s * r[2] - t) / t for r, t in zip(rows, y) if t > 0]
    return EngineCosts(
        request_s=request_s,
        prefill_token_s=prefill_s,
        decode_step_s=decode_s,
        block_size=block_size,
        source=FITTED,
        error=round(statistics.fmean(errors), 4),
        probe_s=round(probe_s, 4),
    )


async def probe_costs(engine: Any, block_size: int) -> EngineCosts:
    """Run the probe on a started LLM engine (anything with the protocol's `execute`) and fit it."""
    clock = asyncio.get_running_loop().time
    nonce = uuid.uuid4().hex[:8]
    began = clock()
    await engine.execute(PrimOp.PREFILLING, [request(4, f"warm {nonce}", 1)])
    samples: list[tuple[int, int, float]] = []
    plan = [(PrimOp.PREFILLING, w, 1) for w in PREFILL_WORDS] + [
        (PrimOp.DECODING, DECODE_WORDS, DECODE_TOKENS)
    ]
    for j, (op, words, out) in enumerate(plan):
        t = clock()
        result = (await engine.execute(op, [request(words, f"probe {nonce} {j}", out)]))[0]
        took = clock() - t
        new = int(result["num_prompt_tokens"]) - int(result.get("num_cached_tokens") or 0)
        samples.append((new, int(result.get("num_output_tokens", out)) if op == PrimOp.DECODING else 1, took))
    return fit(samples, block_size, clock() - began)


async def engine_costs(engine: Any, option: bool | str, block_size: int) -> dict[str, Any]:
    """What an LLM adapter puts in `profile.costs` once started: a named profile's costs, the probe's
    fit (option True), or {} (False: none reported)."""
    option = check_costs_option(getattr(engine, "name", "llm"), option)
    if option is False:
        return {}
    if isinstance(option, str):
        return profile_costs(option).as_dict()
    return (await probe_costs(engine, block_size)).as_dict()
