"""How the LAMPS studies' systems handle a call that pauses for an API (bench.studies.sim.sim_lamps):
INFERCEPT's least-waste choice of preserve / discard / swap, the engine's priorities under LAMPS, and
the per-token costs both read from the profile."""

from __future__ import annotations

from typing import Any


def fwd_seconds_per_token(entry: dict[str, Any]) -> float:
    """Seconds of model forwarding per recomputed context token (INFERCEPT's T_fwd(C) / C, LAMPS'
    recompute cost): the profile's `prefill_token`, or for a profile whose token table holds the
    per-token work (`teola profile --from-measured`: prefill_token 0) a full prefill chunk's
    iteration (max_num_batched_tokens tokens, attention not counted) over its tokens. With 0 here
    INFERCEPT's equation 2 prices discarding at nothing and every pause is discarded."""
    cost = entry["cost"]
    if float(cost.get("prefill_token", 0.0)) > 0:
        return float(cost["prefill_token"])
    chunk = int(entry.get("max_num_batched_tokens", 2048))
    return _iteration_cost(entry).step_seconds(chunk, 0) / chunk


def _iteration_cost(entry: dict[str, Any]) -> Any:
    """The profile entry's iteration cost without its context and attention terms (LAMPS' step_s
    and recompute price: a decode step of a batch, a prefill chunk)."""
    from engines.sim.cost import IterationCost

    cost = entry["cost"]
    return IterationCost(
        **{k: cost[k] for k in ("base", "prefill_token", "decode_seq", "token_table") if k in cost}
    )


class EnginePriority:
    """LAMPS' ranking carried into the engine (set-up "engine_priority", a mechanism check of
    bench.studies.sim.sim_lamps_paper's sweep): each call it
    sends gets its LAMPS score as the request's priority (preserved continuations and starving
    requests first), and the simulated engine runs with `scheduling="priority"`, so the engine's own
    waiting queue (calls preempted when KV runs out) and its preemption victims follow LAMPS' order,
    as LAMPS on vLLM 0.2 sorts vLLM's waiting and running queues by its policy. Without it the
    engine keeps its own FCFS order for what is already inside it. `policy`: the (possibly
    KVAdmission-wrapped) `lamps` policy; every other attribute is the policy's."""

    def __init__(self, policy: Any) -> None:
        self.policy = policy

    def __getattr__(self, name: str) -> Any:
        return getattr(self.policy, name)

    def schedule(self, queue: Any, now: float, limits: Any) -> Any:
        from teola.scheduling.base import Pick, resumes_preserved
        from teola.scheduling.program.lamps import request_key

        decision = self.policy.schedule(queue, now, limits)
        scores, starving = self.policy.scores, self.policy.starving
        picks = []
        for p in decision.picks:
            e = p.entry
            rank = (
                -2
                if resumes_preserved(e)
                else -1
                if request_key(e) in starving
                else int(min(scores.get(e, 0.0), 2**62))
            )
            picks.append(Pick(entry=e, count=p.count, priority=rank))
        decision.picks = picks
        return decision


def handling_for(
    system: str, policy: Any, kind: str, context: int, other: int, costs: dict[str, float]
) -> str:
    """The "pause_kv" a segment is queued with: "auto" for LAMPS (resolved by the engine's scheduler
    from LAMPS' own predictions, as LAMPS ranks the call); for the baselines INFERCEPT's choice from
    `context` and `other` (bench.studies.programs.lamps_real decides so at queue time; here the simulated
    engine replaces it at the pause: `infercept_at_pause`)."""
    if system == "LAMPS":
        return "auto"
    if system == "vLLM":
        return "discard"
    return infercept(costs, kind, context, other)


def infercept(costs: dict[str, Any], kind: str, context: int, other: int) -> str:
    """INFERCEPT's least-waste handling (its equations 1-3) of a `kind` API call for a call of
    `context` tokens beside `other` tokens of running calls, at the type's mean duration."""
    from teola.runtime import choose_handling

    return choose_handling(
        costs["api_means"][kind], context, other, costs["fwd"] * context, costs["swap"] * context
    )


def infercept_at_pause(costs: dict[str, Any], kinds: dict[str, str], decided: dict[str, str]) -> Any:
    """The simulated engine's `decide_pause` for the baselines: INFERCEPT decides when the call
    reaches its API call, from its context and the running batch's then; `kinds`: kv_key -> API type;
    each decision is left in `decided` under the call's kv_key."""

    def decide(seq: Any, running: int) -> str:
        key = seq.req["kv_key"]
        decided[key] = infercept(costs, kinds[key], seq.computed, running)
        return decided[key]

    return decide
