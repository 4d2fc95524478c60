"""Runs multi-call programs (teola.sim.program_workloads) through a started runtime with
`teola.api.program.Program`, each call as soon as its parents finished, and reports program latency:
the harness every program study shares, on real engines (vLLM) or in the simulator's virtual time
(teola.sim.virtual_loop.run_virtual: the loop's clock is the only clock read here). Also: the
shipped texts the prompts are made of, the program policies' queue options and baselines, and
throughput at equal latency over a sweep of rates."""

from __future__ import annotations

import asyncio
import random
import statistics
from collections.abc import Awaitable, Callable
from typing import Any

from teola.sim.program_workloads import ProgramSpec

SYSTEM = (
    "You are a concise assistant inside an agentic program. Answer the user's question in one short "
    "sentence, using the conversation and any document given."
)
# the program policies' queues; service in decoded tokens (calls of the real-engine studies decode
# 6-24 tokens, so the first queue holds ~1 call)
QUEUES = {"base_quantum": 16.0, "growth": 2.0, "num_queues": 8, "service": "tokens"}
# the runtime's counters of preemption and resumption, reported per set as what the set added to them
RESUME_COUNTERS = (
    "preemptions",
    "resumed_tokens",
    "resumed_cached_tokens",
    "resumed_swapped_tokens",
    "resumed_unrun",
)
BASELINES = ("fcfs", "fifo")  # FCFS as vLLM runs it, or teola's batching strawman (pages before 82110ed)
FCFS_TEXT = {
    "fcfs": (
        "policy `fcfs`: calls in arrival order, each returning when it ends, "
        "the same admission (vLLM's order)"
    ),
    "fifo": "teola's `fifo` batching strawman: a batch's calls all return when its longest ends",
}


def policy_options(name: str, **options: Any) -> dict[str, Any]:
    """The options a program study gives policy `name`: none for the baselines, QUEUES updated by
    `options` for the program policies."""
    return {} if name in BASELINES else {**QUEUES, **options}


def percentile(values: list[float], q: float) -> float:
    """The q-th percentile (q in [0, 100]) with linear interpolation between closest ranks (numpy's
    default, and bench.lib.results'); nan for an empty list."""
    xs = sorted(values)
    if not xs:
        return float("nan")
    k = (len(xs) - 1) * q / 100
    lo, hi = int(k), min(int(k) + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


def load_texts(n_questions: int = 400, n_docs: int = 60) -> tuple[list[str], list[str], str]:
    """Questions and ~500-token documents (three lead paragraphs each) from shipped data."""
    from engines.assets.corpora import load_questions, load_wiki_summaries

    questions = [q["question"].strip().rstrip("?") + "?" for q in load_questions("nq_open", n_questions)]
    arts = [a["text"] for a in load_wiki_summaries(n=2000) if 500 <= len(a["text"]) <= 900]
    docs = [" ".join(arts[i : i + 3]) for i in range(0, 3 * n_docs, 3)]
    return questions, docs, "NQ-open questions and Wikipedia lead paragraphs (engines.assets.corpora)"


def user_turn(
    rng: random.Random, questions: list[str], filler: list[str] | None, tokens: int, token_ratio: float
) -> str:
    """A shipped question, preceded (when `tokens` > 0) by words of `filler` texts until the turn has
    about `tokens` tokens: words and punctuation marks counted as the simulated engine counts them
    (engines.sim.text.count_tokens), `token_ratio` tokens each."""
    from engines.sim.text import count_tokens

    q = questions[rng.randrange(len(questions))]
    want = round(tokens / token_ratio) - count_tokens(q)
    words: list[str] = []
    have = 0
    while filler and have < want:
        for w in filler[rng.randrange(len(filler))].split():
            if have >= want:
                break
            words.append(w)
            have += count_tokens(w)
    return " ".join(words + [q])


async def run_program(
    rt: Any,
    spec: ProgramSpec,
    t0: float,
    tag: str,
    questions: list[str],
    doc: str | None,
    log: list[dict[str, Any]],
    window: int | None = None,
    filler: list[str] | None = None,
    token_ratio: float = 1.3,
) -> float:
    """Wait for the program's arrival, run its calls (each as soon as its parents finished) and
    return its latency (completion - arrival). `window`: a chat keeps only its last `window`
    characters of conversation (None: all of it). A call with `user` tokens asks a user turn of
    that size, padded with `filler` text (see user_turn)."""
    from teola.api.program import Program

    clock = asyncio.get_running_loop().time  # the loop's clock: real on vLLM, virtual in the simulator
    await asyncio.sleep(max(0.0, t0 + spec.arrival - clock()))
    arrival = t0 + spec.arrival
    rng = random.Random(spec.pid)
    tasks: dict[int, asyncio.Future] = {}
    async with Program(rt, f"{tag}:{spec.pid}", system=f"[{tag}] {SYSTEM}") as prog:

        async def one(i: int) -> Any:
            call = spec.calls[i]
            parents = [await tasks[p] for p in call.parents]
            if call.pause:  # a tool call between the parent's action and this call (react programs)
                await asyncio.sleep(call.pause)
            if spec.kind == "tree":
                prompt = _tree_prompt(root_q, parents, i)
            else:  # a react program's later calls read the tool's observation
                turn = user_turn(rng, questions, filler, call.user, token_ratio)
                prompt = (
                    conversation[0] + f"{'Observation' if spec.kind == 'react' and i else 'User'}: {turn}\n"
                )
            res = await prog.call(
                prompt,
                parent_ids=[f"c{p}" for p in call.parents],
                call_id=f"c{i}",
                max_tokens=call.output,
                ignore_eos=True,
            )
            if spec.kind in ("chat", "react"):
                conversation[0] = prompt + f"Assistant: {res.strip()}\n"
                if window is not None:
                    conversation[0] = conversation[0][-window:]
            log.append(_call_record(spec.pid, i, res, clock() - t0))
            return res

        root_q = questions[rng.randrange(len(questions))]
        conversation = [f"Document: {doc}\n" if doc else ""]
        await _launch(one, tasks, len(spec.calls), sequential=spec.kind in ("chat", "react"))
    return clock() - arrival


def _tree_prompt(root_q: str, parents: list[Any], i: int) -> str:
    """A tree program's call: the root question, its parents' ideas, and the step it proposes."""
    thoughts = " ".join(f"Idea {k + 1}: {p.strip()}" for k, p in enumerate(parents))
    return f"Question: {root_q}\n{thoughts}\nPropose candidate step {i + 1}."


def _call_record(pid: Any, i: int, res: Any, end: float) -> dict[str, Any]:
    """The log's record of call `i` of program `pid`: where it ran, its tokens, when it ended."""
    r = res.result
    return {
        "program": pid,
        "call": i,
        "instance": res.instance,
        "output": r.get("num_output_tokens"),
        "prompt": r.get("num_prompt_tokens"),
        "cached": r.get("num_cached_tokens"),
        "end": end,
    }


async def _launch(
    one: Callable[[int], Awaitable[Any]], tasks: dict[int, asyncio.Future], n: int, *, sequential: bool
) -> None:
    """Start calls 0..n-1 (each waits for its parents' tasks in `tasks`): one after the other (chats
    and react programs), or all at once; returns when every call has ended."""
    for i in range(n):
        tasks[i] = asyncio.ensure_future(one(i))
        if sequential:
            await tasks[i]
    if not sequential:
        await asyncio.gather(*tasks.values())


async def run_set(
    rt: Any,
    progs: list[ProgramSpec],
    tag: str,
    questions: list[str],
    docs: list[str] | None = None,
    window: int | None = None,
    filler: list[str] | None = None,
    token_ratio: float = 1.3,
    keep_log: bool = False,
) -> dict[str, Any]:
    """Run `progs` (arrival times relative to now) to completion; latency statistics (program
    latency in seconds; "tok_mean" / "tok_p99": Autellix's program-level token latency, a program's
    latency over the tokens it decoded, in seconds per token). `filler` and
    `token_ratio` size the user turns of calls that ask for one (run_program); `keep_log` adds
    every call's record (program, tokens, end time) as "log"."""
    log: list[dict[str, Any]] = []
    m = rt.metrics
    before = {k: getattr(m, k) for k in RESUME_COUNTERS}
    clock = asyncio.get_running_loop().time
    t0 = clock()
    lats = await asyncio.gather(
        *(
            run_program(
                rt,
                p,
                t0,
                tag,
                questions,
                docs[k % len(docs)] if docs else None,
                log,
                window,
                filler,
                token_ratio,
            )
            for k, p in enumerate(progs)
        )
    )
    wall = clock() - t0
    return {
        **_set_summary(progs, lats, log, wall),
        **{k: getattr(m, k) - before[k] for k in RESUME_COUNTERS},
        **({"log": log} if keep_log else {}),
    }


def _set_summary(
    progs: list[ProgramSpec], lats: list[float], log: list[dict[str, Any]], wall: float
) -> dict[str, Any]:
    """A set's latency statistics, throughput, tokens and where its calls ran (run_set)."""
    decoded: dict[str, int] = {}
    for c in log:
        decoded[c["program"]] = decoded.get(c["program"], 0) + (c["output"] or 0)
    # Autellix's "program-level token latency": response time over the tokens the program generated
    tok = [lat / decoded[p.pid] for p, lat in zip(progs, lats) if decoded.get(p.pid)]
    prompt = sum(c["prompt"] or 0 for c in log)
    cached = sum(c["cached"] or 0 for c in log)
    per_inst: dict[str, int] = {}
    for c in log:
        per_inst[c["instance"]] = per_inst.get(c["instance"], 0) + 1
    moved = sum(1 for p in progs if len({c["instance"] for c in log if c["program"] == p.pid}) > 1)
    return {
        "programs": len(progs),
        "calls": len(log),
        "mean": statistics.mean(lats),
        "p50": percentile(lats, 50),
        "p95": percentile(lats, 95),
        "p99": percentile(lats, 99),
        "tok_mean": statistics.mean(tok) if tok else None,
        "tok_p99": percentile(tok, 99) if tok else None,
        "wall": wall,
        "throughput": len(progs) / wall,
        "output_tokens": sum(c["output"] or 0 for c in log),
        "prompt_tokens": prompt,
        "cached_tokens": cached,
        "calls_per_instance": per_inst,
        "programs_on_several_instances": moved,
    }


def rate_at(rows: list[dict[str, Any]], policy: str, target: float, key: str = "mean") -> float | None:
    """The highest arrival rate at which `policy`'s latency (`key`, default the mean) stays <= target
    (linear interpolation between swept rates); None if even the lowest rate misses it."""
    pts = sorted((r["rate"], r[key]) for r in rows if r["policy"] == policy)
    best = None
    for (r0, l0), (r1, l1) in zip(pts, pts[1:] + [(None, None)]):
        if l0 > target:
            break
        best = r0
        if r1 is not None and l1 > target:
            best = r0 + (r1 - r0) * (target - l0) / (l1 - l0)
            break
    return best


def rates_at_target(
    rows: list[dict[str, Any]],
    policies: tuple[str, ...] | list[str],
    base: str,
    factor: float = 1.5,
    key: str = "mean",
) -> tuple[float, dict[str, float | None]]:
    """Throughput at equal latency: the target (`factor` x `base`'s lowest latency, `key` naming the
    latency column) and the rate each policy sustains under it (rate_at)."""
    target = factor * min(r[key] for r in rows if r["policy"] == base)
    return target, {p: rate_at(rows, p, target, key) for p in policies}
