"""The set-up of the heavy-tailed program study on vLLM (bench/studies/programs/programs_heavy.py): the
program shapes with their tails, the policies compared, the two rule sets a run can give the program
policies, and how a page names them."""

from __future__ import annotations

from typing import Any

from teola.scheduling.program.queues import PROMOTIONS
from teola.scheduling.registry import make_policy
from teola.sim.program_runs import BASELINES, QUEUES

SHAPES = {
    "chat": {"max_calls": 10, "out_mean": 24, "out_max": 160},
    "tree": {"steps": (2, 4), "width": (2, 6), "out_mean": 16, "out_max": 96},
    "react": {"max_steps": 8, "action_mean": 24, "action_max": 64, "observation_mean": 60},
}
PROGRAM_POLICIES = ("mlfq", "plas", "atlas")
SHOWN = {"fifo": "fcfs (fifo batches)"}

# What the program policies are given. "paper": their defaults, Autellix's rules as teola reads them;
# "tokens": the named deviation the pages before issue 73 ran (QUEUES of teola.sim.program_runs).
RULES = {
    "paper": (
        "the policies' defaults (Autellix's rules): service in seconds on the engine's executor "
        "(a run without it is charged its wall time from pick to end: the named fallback "
        "`wall-time-service`), quanta re-fitted so the last of 8 queues starts at the 95th percentile "
        'of observed call service (`quanta="observed"`), ATLAS\'s one scalar per program '
        '(`critical_path="program"`), anti-starvation beta 8'
    ),
    "tokens": (
        f'the named deviation `service="tokens"` with fixed quanta: queues {QUEUES}, anti-starvation beta 8'
    ),
}


def rule_options(name: str, rules: str, preempt: bool = True, promotion: str = "preempt") -> dict[str, Any]:
    """The options policy `name` gets under `rules` ("paper" or "tokens"), with `preempt=False` when
    running calls are never to be preempted and `promotion="admit"` when a starving call promoted to
    the top queue preempts only from the queue it left; none for the baselines."""
    if rules not in RULES:
        raise ValueError(f"unknown rules {rules!r}; known: {', '.join(RULES)}")
    if promotion not in PROMOTIONS:
        raise ValueError(f"unknown promotion {promotion!r}; known: {', '.join(PROMOTIONS)}")
    if name in BASELINES:
        return {}
    opts: dict[str, Any] = {} if rules == "paper" else {**QUEUES, "quanta": "fixed"}
    if promotion != "preempt":
        opts["promotion"] = promotion
    return opts if preempt else {**opts, "preempt": False}


def preemption_text(preempt: bool, promotion: str = "preempt") -> str:
    """How a page names the program policies' preemption and anti-starvation promotion."""
    if not preempt:
        return (
            "preemption off (`preempt=False`: the queues order admission only; "
            "a running call runs to its end)"
        )
    if promotion == "admit":
        return (
            'preemption on, `promotion="admit"` (a call anti-starvation promotes is admitted first but '
            "preempts running calls only from the queue it was promoted from)"
        )
    return "preemption on, a promoted call preempting from the top queue (Algorithm 1)"


def set_rules_policy(
    rt: Any, name: str, rules: str, preempt: bool = True, promotion: str = "preempt"
) -> None:
    """A fresh policy object (and process table) on the runtime's LLM engine for the next run."""
    rt.schedulers["llm"].policy = make_policy(name, **rule_options(name, rules, preempt, promotion))


def policies_of(rows: list[dict[str, Any]]) -> list[str]:
    """The policies the rows hold, the FCFS baseline first."""
    return [p for p in (*BASELINES, *PROGRAM_POLICIES) if any(r["policy"] == p for r in rows)]


def baseline_of(rows: list[dict[str, Any]]) -> str:
    """The FCFS baseline the rows ran: `fcfs` (vLLM's order) or `fifo` (teola's batching strawman)."""
    return next(p for p in BASELINES if any(r["policy"] == p for r in rows))
