"""Each program's own unloaded latency: its calls run alone on the engine, priced by the profile's
iteration cost (engines/sim/cost.py IterationCost), the same cost the simulated engine charges.

A single-threaded program (chat, react) runs its calls one after another: each prefills its new
tokens (the first call its whole prompt; a later one its user turn, the conversation before it being
in the prefix cache) in chunks of at most `max_batched` tokens, then decodes its output one token per
iteration at batch 1, then sleeps its tool pause. A tree program runs its steps one after another;
a step prefills its calls' prompts, each with its parents' outputs (siblings start together, before
any of them is in the prefix cache), and decodes its calls side by side, the batch shrinking as the shorter
ones end. Prompts are the generator's token counts (the simulator tokenizes the actual text). Measured against
the simulator running each program alone (vLLM-opt, a100-llama3.1-8b-measured, the first 20 programs):
simulated / estimated 0.97-1.01 on ShareGPT, 0.88-1.00 on BFCL, 0.85-0.91 on LATS (10 programs; the
estimate prices the siblings' prompts as if none were cached). The
steady-state study (bench/studies/sim/steady_state.py) sets each program's overdue limit and the
warm-up from these latencies.
"""

from __future__ import annotations

from typing import Any


def cost_of(profile: dict[str, Any]) -> tuple[Any, int, int]:
    """The profile's IterationCost for vLLM, its chunk size (max_num_batched_tokens) and template tokens."""
    from engines.sim.cost import IterationCost

    llm = profile["engines"]["vllm"]
    cost = IterationCost(
        **{
            k: tuple(map(tuple, v)) if isinstance(v, list) else v
            for k, v in llm["cost"].items()
            if k in IterationCost.__dataclass_fields__
        }
    )
    return cost, int(llm.get("max_num_batched_tokens", 8192)), int(llm.get("template_tokens", 0))


def prefill_seconds(cost: Any, new: int, context: int, max_batched: int, copies: int = 1) -> float:
    """Seconds to prefill `new` tokens after `context` cached ones, in chunks of `max_batched`
    tokens; `copies` sequences of it side by side (each attends to its own tokens only)."""
    s, done, total = 0.0, 0, new * copies
    while done < total:
        n = min(max_batched, total - done)
        at = context + (done + n / 2 if copies == 1 else new / 2)
        s += cost.seconds(n, 0, 0, n * at)
        done += n
    return s


def decode_seconds(cost: Any, outputs: list[int], context: int) -> float:
    """Seconds to decode `outputs` tokens side by side (each call's first token comes with its
    prefill), every call starting at `context` tokens: the batch shrinks as the shorter calls end."""
    left = sorted(max(0, o - 1) for o in outputs)
    s, step, batch = 0.0, 0, len(left)
    for k in left:
        span = k - step  # iterations at this batch size
        if span > 0:
            # sum over the span of the batch's context: batch x (context + step + j) for j < span
            ctx_sum = batch * (span * (context + step) + span * (span - 1) / 2)
            s += cost.factor(batch) * (span * cost.step_seconds(0, batch) + cost.context_token * ctx_sum)
        step, batch = k, batch - 1
    return s


def solo_latency(spec: Any, cost: Any, max_batched: int = 8192, template: int = 0) -> float:
    """Seconds program `spec` (teola.sim.program_workloads.ProgramSpec) takes alone on the engine."""
    if spec.kind != "tree":
        s, ctx = 0.0, 0
        for i, c in enumerate(spec.calls):
            new = (c.prompt if i == 0 else c.user) + template
            s += c.pause + prefill_seconds(cost, new, ctx, max_batched)
            ctx += new
            s += decode_seconds(cost, [c.output], ctx)
            ctx += c.output
        return s
    steps: dict[tuple[int, ...], list[Any]] = {}
    for c in spec.calls:
        steps.setdefault(c.parents, []).append(c)
    s = 0.0
    for parents, calls in steps.items():
        shared = sum(spec.calls[k].output for k in parents) + calls[0].prompt + template
        s += prefill_seconds(cost, shared, 0, max_batched, len(calls))
        s += decode_seconds(cost, [c.output for c in calls], shared)
    return s


def solo_latencies(kind: str, n: int, profile: dict[str, Any], seed: int = 1) -> list[float]:
    """solo_latency of the first `n` programs of `kind` (the same programs at every rate)."""
    from bench.studies.sim.program_setup import programs

    cost, chunk, template = cost_of(profile)
    return [solo_latency(p, cost, chunk, template) for p in programs(kind, 1.0, n, seed)]
