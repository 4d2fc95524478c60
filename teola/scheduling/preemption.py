"""The rules of preemptive LLM calls under a program policy (Autellix §4), as pure logic: which picks
run as preemptible calls, what a call holds of the KV cache (`held_tokens`), how many admission
slots an instance has left, and what a preempted
request has left to decode. Which running call to displace is the policy's own `victims`
(teola.scheduling.base.Policy). The engine tier's `Preemptor`
(teola/runtime/engine_tier/preemption.py) applies these rules to running engine streams."""

from __future__ import annotations

from typing import Any

from engines.requests import PrimOp
from teola.scheduling.base import Pick

OP = PrimOp.DECODING.value
STREAM_OP = PrimOp.PARTIAL_DECODING.value


def preemptible(op: str, picks: list[Pick]) -> bool:
    """Whether these picks run as preemptible calls: decoding entries none of whose requests was
    dispatched otherwise, and partial decodes of one streaming request each (as the graph
    scheduler dispatches them)."""
    if op == STREAM_OP:
        return all(p.entry.taken == 0 and len(p.entry.requests) == 1 for p in picks)
    return op == OP and all(p.entry.taken == 0 for p in picks)


# One KV block of vLLM's GPU default size: the headroom per request until the engine reports its own
# block size (see held_tokens and teola.scheduling.kv_ledger).
KV_HEADROOM = 16


def held_tokens(prompt: int, decoded: int, block: int = KV_HEADROOM) -> int:
    """The KV tokens a running (or just admitted) request is charged: its `prompt` (with the token
    ids of earlier runs it resumes from) + the tokens `decoded` in this run + one engine `block`
    (KV_HEADROOM until the engine reports its block size) for its partly filled last block and the
    token it decodes next. Admission by this live count is Autellix Alg. 1's `engine.can_fit` (a
    waiting call is admitted while the running calls' held tokens plus its own fit the instance's
    token budget and seats remain), instead of charging each call its whole output budget up front,
    which over-reserves the KV by every call's unwritten tokens."""
    return prompt + decoded + block


def admission_slots(budget: int, token_budget: int, running: int, tokens: int) -> int:
    """Calls' requests an instance may still admit: `budget` less the `running` ones, and none while
    the running calls hold its `token_budget` (estimated `tokens`; 0 = no token budget)."""
    if running and token_budget and tokens >= token_budget:
        return 0
    return budget - running


def tokens_left(request: dict[str, Any], decoded_before: int, result: Any) -> int | None:
    """What a request still has to decode after a run that ended with `result`, having decoded
    `decoded_before` tokens in earlier runs: 0 if the run ended it, None if it was aborted without
    the token ids it needs to resume (or has no output budget: it cannot resume)."""
    if not (isinstance(result, dict) and result.get("aborted")):
        return 0
    ids = result.get("output_token_ids")
    budget = int(request.get("max_tokens") or 0)
    if not isinstance(ids, list) or budget <= 0:
        return None
    return budget - decoded_before - len(ids)


def swap_keys(requests: list[dict[str, Any]]) -> list[str]:
    """The KV swap keys of these requests."""
    return [r["kv_swap_key"] for r in requests if r.get("kv_swap_key")]
