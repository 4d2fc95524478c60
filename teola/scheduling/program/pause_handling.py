"""LLM calls that pause for a tool, as their engine's scheduler sees them: the segments of one call
share a "kv_key" (teola.runtime.requests, teola.api.tool_calls), and every segment but the last
says what the engine does with its KV during the tool call (`pause_kv`, a hint its submitter hands
in with it, kept in its dispatch record). The book decides; the engine scheduler writes its
decisions into the records (`PauseHint`).

`PauseBook` keeps, per engine, what the queries' paused calls need between their segments:
  - "auto": a segment queued with the handling "auto" (its dispatch record's `pause_kv`) gets
    INFERCEPT's least-waste handling (`choose_pause_handling`) when it is queued, after its length prediction:
    its context C is its prompt + its predicted output (`predicted_shape`), the same inputs LAMPS scores it
    by, so the handling LAMPS ranks a segment under is the one applied to it;
  - a continuation of a call whose KV was preserved is marked `resumes_preserved`, so policies run
    it first (INFERCEPT keeps such a request in the running batch);
  - the expected duration of a tool call: the policy's running mean per tool when it keeps one
    (LAMPS, fed by `teola.api.tool_calls` as each tool call ends), else the "api_defaults" of
    `PauseCosts` (the Runtime option "pause_costs").
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from teola.scheduling.base import PauseModel, Pending, Policy
from teola.scheduling.program.api_handling import api_seconds, choose_handling, predicted_shape


@dataclass(slots=True)
class PauseCosts:
    """The costs "auto" weighs when the engine's policy has none of its own (every policy but LAMPS):
    fwd_s_per_token: seconds to recompute one token of context; swap_s_per_token: seconds to move one
    token's KV one way (None: the engine cannot swap); api_defaults: tool -> expected seconds before
    any call of it is measured; default_api_s: the same for a tool with neither."""

    fwd_s_per_token: float = 1e-4
    swap_s_per_token: float | None = None
    api_defaults: dict[str, float] = field(default_factory=dict)
    default_api_s: float = 1.0

    @classmethod
    def from_option(cls, value: Any) -> PauseCosts:
        """The Runtime option "pause_costs" (a dict of the fields above, or None for the defaults)."""
        if value is None:
            return cls()
        if isinstance(value, cls):
            return value
        if not isinstance(value, dict) or set(value) - {
            "fwd_s_per_token",
            "swap_s_per_token",
            "api_defaults",
            "default_api_s",
        }:
            raise ValueError(
                "Runtime: pause_costs must be a dict with keys among fwd_s_per_token, swap_s_per_token, "
                f"api_defaults, default_api_s; got {value!r}"
            )
        costs = cls(**value)
        numbers = [costs.fwd_s_per_token, costs.default_api_s, *costs.api_defaults.values()]
        if costs.swap_s_per_token is not None:
            numbers.append(costs.swap_s_per_token)
        if not all(isinstance(x, (int, float)) and not isinstance(x, bool) and x >= 0 for x in numbers):
            raise ValueError(f"Runtime: pause_costs values must be seconds >= 0, got {value!r}")
        return costs


def own_costs(policy: Policy | None) -> PauseModel | None:
    """The policy's own cost model for pauses (LAMPS: per-token costs, per-tool means, a predicted
    batch), which then decides instead of `PauseCosts`; None when it keeps none."""
    return None if policy is None else policy.pause_costs()


def choose_pause_handling(
    policy: Policy | None,
    tool: str | None,
    context: int,
    other: int | None = None,
    costs: PauseCosts | None = None,
) -> str:
    """The handling of a pause for `tool` (None: not known yet, the mean over the tools seen) with
    `context` tokens of this call and `other` of the rest of the batch (None: the policy's own
    prediction when it has one, else 0). The policy's cost constants and per-tool means when it keeps
    them (`Policy.pause_costs`), else `costs` (default: an expected 1 s tool call at 0.1 ms per
    recomputed token, no swap)."""
    costs = costs or PauseCosts()
    own = own_costs(policy)
    if own is not None:
        fwd_s, swap_s, means = own.fwd_s, own.swap_s, own.api_means
        other = own.other_context if other is None else other
    else:
        fwd_s, swap_s = costs.fwd_s_per_token, costs.swap_s_per_token
        means = {k: float(v) for k, v in costs.api_defaults.items()}
        other = 0 if other is None else other
    api_s = api_seconds(means, tool, costs.default_api_s)
    return choose_handling(
        api_s, context, other, fwd_s * context, None if swap_s is None else swap_s * context
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class PauseHint:
    """What `PauseBook.prepare` decided for one queued request: the handling of its pause (None: it
    does not pause) and whether it continues a call whose KV was preserved."""

    pause_kv: str | None
    resumes_preserved: bool


class PauseBook:
    """The paused calls of one LLM engine's queries (see the module docstring). `batch_size`: the
    engine's max efficient batch; "auto" counts the rest of the batch as (batch_size - 1) x the mean
    context of the calls queued so far (LAMPS §3.2.1's profiled batch) unless the policy predicts it."""

    def __init__(self, costs: PauseCosts | None = None, batch_size: int = 1) -> None:
        self.costs = costs or PauseCosts()
        self.batch_size = max(1, batch_size)
        self.paused: dict[tuple[str, str], str] = {}  # (query, kv_key) -> the handling of its pause
        self._context = (0.0, 0)

    def prepare(self, entry: Pending, policy: Policy) -> list[PauseHint]:
        """`entry`'s requests are being queued (its `tokens`: their estimated prompt + output; its
        records: their length predictions and the submitter's handlings): what its records get,
        per request: "auto" resolved, and whether it continues a call whose KV was preserved."""
        out = []
        for i, req in enumerate(entry.requests):
            rec = entry.records[i]
            key = req.get("kv_key")
            if key is None:
                out.append(PauseHint(pause_kv=rec.pause_kv, resumes_preserved=rec.resumes_preserved))
                continue
            tokens = entry.tokens[i] if entry.tokens and i < len(entry.tokens) else None
            context = sum(predicted_shape(req.get("max_tokens"), rec.predicted_tokens, tokens))
            mean, n = self._context
            self._context = ((mean * n + context) / (n + 1), n + 1)
            preserved = self.paused.pop((entry.query_id, key), None) == "preserve" or rec.resumes_preserved
            handling = rec.pause_kv
            if handling == "auto":
                other = None if own_costs(policy) is not None else self.other_context()
                handling = choose_pause_handling(policy, req.get("api"), context, other, self.costs)
            if handling:
                self.paused[(entry.query_id, key)] = handling
            out.append(PauseHint(pause_kv=handling, resumes_preserved=preserved))
        return out

    def other_context(self) -> int:
        """Predicted tokens of the other calls in a batch with a call."""
        return int((self.batch_size - 1) * self._context[0])

    def end_program(self, query_id: str) -> None:
        """`query_id` ended: forget its paused calls."""
        for k in [k for k in self.paused if k[0] == query_id]:
            del self.paused[k]
