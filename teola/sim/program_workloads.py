"""Multi-call LLM programs as data, and the generators of the program studies' workloads (Autellix's
shapes): single-threaded chats, multi-threaded trees (LATS/MCTS-like) and ReAct tool loops, with
Poisson arrivals. Pure and seeded: the same arguments give the same programs. teola.sim.program_runs
runs them through the real runtime, in real time (vLLM) or virtual time (the simulator)."""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

SYSTEM_TOKENS = 200  # system prompt tokens shared by every call (the generators' default)


@dataclass(slots=True)
class CallSpec:
    """One LLM call of a program: `prompt` tokens of context it needs, `output` tokens to decode,
    `parents` indices (into the program's calls) that must finish first; `user`: tokens of new user
    text the call adds (0: one shipped question, as the generators draw by default); `pause`:
    seconds of a tool call between its parents' end and its start (ReAct-like programs; the runners
    of teola.sim.program_runs sleep it)."""

    prompt: int
    output: int
    parents: tuple[int, ...] = ()
    user: int = 0
    pause: float = 0.0


@dataclass(slots=True)
class ProgramSpec:
    pid: str
    arrival: float
    calls: list[CallSpec]
    kind: str = "chat"


def _out(rng: random.Random, mean: float, lo: int, hi: int) -> int:
    return int(min(hi, max(lo, rng.expovariate(1.0 / mean))))


def chat_program(
    pid: str,
    t: float,
    rng: random.Random,
    qtok: list[int],
    system: int = SYSTEM_TOKENS,
    max_calls: int = 24,
    out_mean: float = 60,
    out_max: int = 400,
    calls_mean: float | None = None,
    user_mean: float | None = None,
    user_max: int = 1024,
) -> ProgramSpec:
    """A single-threaded program: a long-tailed number of sequential calls (at most `max_calls`)
    with exponential output lengths (mean `out_mean`, clipped to [4, out_max]).

    By default the number of calls is 1 + Pareto(1.6) - 1 + Exp(mean 2) (mean ~4) and each user turn
    is 1-4 shipped questions. `calls_mean` draws it instead from a lognormal (sigma 1) of that mean,
    and `user_mean` gives each call an exponential number of new user tokens (clipped to
    [8, user_max]), to reproduce published per-workload statistics (the simulated program studies)."""
    if calls_mean is None:
        n = min(max_calls, 1 + int(rng.paretovariate(1.6)) - 1 + int(rng.expovariate(1 / 2.0)))
    else:
        n = min(max_calls, max(1, round(rng.lognormvariate(math.log(calls_mean) - 0.5, 1.0))))
    calls, ctx = [], system
    for i in range(max(1, n)):
        if user_mean is None:
            user, extra = rng.choice(qtok) * rng.randint(1, 4), 0
        else:
            user = extra = _out(rng, user_mean, 8, user_max)
        out = _out(rng, out_mean, 4, out_max)
        calls.append(CallSpec(ctx + user, out, (i - 1,) if i else (), extra))
        ctx += user + out
    return ProgramSpec(pid, t, calls, "chat")


def tree_program(
    pid: str,
    t: float,
    rng: random.Random,
    qtok: list[int],
    system: int = SYSTEM_TOKENS,
    steps: tuple[int, int] = (2, 4),
    width: tuple[int, int] = (2, 8),
    out_mean: float = 25,
    out_max: int = 120,
) -> ProgramSpec:
    """A multi-threaded program: `steps` expansion steps of `width` parallel calls each (ranges,
    inclusive); every call of a step depends on all calls of the previous step."""
    q = rng.choice(qtok) * 3
    calls: list[CallSpec] = []
    prev: tuple[int, ...] = ()
    path = 0
    for _ in range(rng.randint(*steps)):
        n = rng.randint(*width)
        step = []
        for _ in range(n):
            step.append(len(calls))
            calls.append(CallSpec(system + q + path, _out(rng, out_mean, 4, out_max), prev))
        path += 40
        prev = tuple(step)
    return ProgramSpec(pid, t, calls, "tree")


def react_program(
    pid: str,
    t: float,
    rng: random.Random,
    qtok: list[int],
    system: int = SYSTEM_TOKENS,
    max_steps: int = 8,
    action_mean: float = 24,
    action_max: int = 64,
    observation_mean: float = 60,
    observation_max: int = 200,
    tool_s: tuple[float, float] = (1.72, 3.33),
    tool_max_s: float = 20.0,
    answers: list[int] | None = None,
) -> ProgramSpec:
    """A ReAct / BFCL-like tool loop: sequential calls, each but the last writing a short action
    (thought + tool call: exponential, mean `action_mean` tokens); after each, a tool call lasting a
    lognormal time with ToolBench's mean and std `tool_s` (LAMPS Table 2; capped at `tool_max_s`)
    whose observation (exponential, mean `observation_mean` tokens) opens the next call's user turn;
    the last call writes the answer, its length drawn from `answers` (recorded real answers; default
    an exponential of mean 60). Steps: 1 + Pareto(1.6) - 1 + Exp(mean 1.5), at most `max_steps`."""
    n = min(max_steps, 1 + int(rng.paretovariate(1.6)) - 1 + int(rng.expovariate(1 / 1.5)))
    mu = math.log(tool_s[0] ** 2 / math.sqrt(tool_s[0] ** 2 + tool_s[1] ** 2))
    sigma = math.sqrt(math.log(1 + (tool_s[1] / tool_s[0]) ** 2))
    calls, ctx = [], system + rng.choice(qtok)
    for i in range(max(1, n)):
        last = i == max(1, n) - 1
        user = _out(rng, observation_mean, 16, observation_max) if i else 0
        out = (
            (rng.choice(answers) if answers else _out(rng, 60, 8, 400))
            if last
            else _out(rng, action_mean, 8, action_max)
        )
        pause = min(tool_max_s, rng.lognormvariate(mu, sigma)) if i else 0.0
        calls.append(CallSpec(ctx + user, out, (i - 1,) if i else (), user, round(pause, 3)))
        ctx += user + out
    return ProgramSpec(pid, t, calls, "react")


def workload(
    kind: str, rate: float, n: int, seed: int, qtok: list[int], system: int = SYSTEM_TOKENS, **shape: Any
) -> list[ProgramSpec]:
    """`n` programs of `kind` ("chat", "tree" or "react") with Poisson arrivals at `rate` programs/s (rate
    0: all at t=0); `shape` goes to the generator (e.g. max_calls, out_mean for chat)."""
    rng = random.Random(seed)
    makers: dict[str, Callable[..., ProgramSpec]] = {
        "chat": chat_program,
        "tree": tree_program,
        "react": react_program,
    }
    make = makers[kind]
    t, out = 0.0, []
    for i in range(n):
        gap = rng.expovariate(
            rate if rate > 0 else 1.0
        )  # drawn either way: same program shapes at every rate
        t += gap if rate > 0 else 0.0
        out.append(make(f"{kind}{i}", t, rng, qtok, system, **shape))
    return out
