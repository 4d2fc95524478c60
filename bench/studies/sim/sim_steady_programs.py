"""SIMULATED: one steady-state point of Autellix's Fig. 12 set-up (bench/studies/sim/sim_autellix.py's
engine, systems and programs) with bench/studies/sim/steady_state.py's trace: programs arrive over
warm-up + window + cool-down, only those arriving in the window are measured, and the run stops once
they have all finished and the cool-down's arrivals are done (programs still running then only kept
the load on and are cancelled). A point where a measured program is still unfinished job["overdue"]
x max(its own unloaded latency, job["overdue_floor"]) after its arrival (steady_state.overdue; the latency
from bench/studies/sim/sim_steady_solo.py) stops there as overloaded: its latency is inf and its
unfinished programs are counted. Each finished program's latency over its own unloaded latency (its
stretch) is summarized, so the long programs' share of a mean is visible.

Per point, sampled every `tick` simulated seconds inside the window: programs in the system, calls
waiting in teola's queue and in the engine, calls running, KV blocks held, the tokens teola counts
as held (its admission's view) over the KV capacity, and the program policy's calls per queue
(bench/studies/sim/sim_steady_levels.py); counted over the window:
teola's preemptions and the engine's KV preemptions.
"""

from __future__ import annotations

import asyncio
import math
import statistics
import sys
import time
from typing import Any

import bench.studies.sim.sim_autellix as sim_autellix
from bench.studies.sim.sim_steady_levels import LevelProbe
from bench.studies.sim.steady_state import OVERDUE, Trace, deadlines, steady


class WindowProbe:
    """Samples the engine every `tick` virtual seconds over the trace's window (from the run's start t0)."""

    def __init__(self, rt: Any, trace: Trace, tick: float) -> None:
        self.sched, self.metrics, self.trace, self.tick = rt.schedulers["llm"], rt.metrics, trace, tick
        self.engine = self.sched.instances[0].handle
        self.samples: list[tuple[int, int, int, float, float]] = []
        self.at_start: tuple[int, int] = (0, 0)
        self.at_end: tuple[int, int] | None = None
        self.levels = LevelProbe()

    def _counters(self) -> tuple[int, int]:
        return self.metrics.preemptions, self.engine.stats["preemptions"]

    async def run(self, t0: float) -> None:
        loop = asyncio.get_running_loop()
        await asyncio.sleep(max(0.0, t0 + self.trace.warmup - loop.time()))
        self.at_start = self._counters()
        end = t0 + self.trace.warmup + self.trace.window
        while loop.time() < end:
            await asyncio.sleep(self.tick)
            pool, eng = self.engine.pool, self.engine
            self.samples.append(
                (
                    len(self.sched.queue),
                    len(eng.waiting),
                    len(eng.running),
                    (pool.num_blocks - pool.free) / pool.num_blocks,
                    self._held(),
                )
            )
            self.levels.sample(self.sched)
        self.at_end = self._counters()

    def _held(self) -> float:
        """What teola counts as held on the instance, over the engine's KV capacity (its admission's
        view of the KV; the engine's own is kv_mean)."""
        pool = self.engine.pool
        return self.sched.instances[0].tokens / (pool.num_blocks * pool.block_size)

    def summary(self) -> dict[str, Any]:
        s = self.samples or [(0, 0, 0, 0.0, 0.0)]
        end = self.at_end or self._counters()
        return {
            "teola_queue_mean": statistics.mean(x[0] for x in s),
            "engine_waiting_mean": statistics.mean(x[1] for x in s),
            "running_mean": statistics.mean(x[2] for x in s),
            "kv_mean": statistics.mean(x[3] for x in s),
            "kv_full": sum(x[3] >= 0.95 for x in s) / len(s),
            "teola_held_mean": statistics.mean(x[4] for x in s),
            "preemptions": end[0] - self.at_start[0],
            "kv_preemptions": end[1] - self.at_start[1],
            "levels": self.levels.summary(),
        }


def _runtime(job: dict[str, Any]) -> tuple[Any, str, dict[str, Any]]:
    """The engine as sim_autellix.run_point builds it (its comments give each choice's source)."""
    from engines.sim.profile import load_profile
    from teola import Engine

    policy, cache = sim_autellix.policy_of(job["kind"], job["system"])
    profile = load_profile(job["profile"])
    llm = {
        **profile["engines"]["vllm"],
        "scheduling": "priority",
        "preemption": "swap" if policy != "fcfs" else "recompute",
        "abort_kv": "swap",
    }
    if not cache:
        llm["enable_prefix_caching"] = False
    prof = {**profile, "engines": {**profile["engines"], "vllm": llm}}
    return (
        Engine("llm", kind="vllm", instances=1, simulate=prof, token_budget=token_budget_of(policy)),
        policy,
        llm,
    )


# vLLM-opt is vLLM's own scheduler (Autellix's baseline): its calls wait in the engine's queue, where
# the engine's KV decides who runs, so teola holds none back by tokens (the simulated engine reports
# its KV capacity since 6a424f6, which teola's FCFS would otherwise charge at prompt + whole output).
UNGATED = 1 << 62


def token_budget_of(policy: str) -> int:
    """The engine spec's token_budget for a system's policy: unlimited for FCFS (vLLM-opt, vLLM),
    0 (the engine's reported KV capacity: admission by live KV use) for the program policies."""
    return UNGATED if policy == "fcfs" else 0


def trace_programs(kind: str, rate: float, horizon: float, seed: int = 1) -> list[Any]:
    """The programs of `kind` arriving at `rate` before `horizon` (the same programs at every rate)."""
    from bench.studies.sim.program_setup import programs

    n = math.ceil(rate * horizon * 1.3) + 20
    progs = programs(kind, rate, n, seed)
    while progs and progs[-1].arrival < horizon:  # not enough drawn: draw more
        n *= 2
        progs = programs(kind, rate, n, seed)
    return [p for p in progs if p.arrival < horizon]


async def watch(tasks: list[asyncio.Future], due: list[float]) -> float | None:
    """Wait for `tasks` (the measured programs) in deadline order (`due`, loop times): the time the
    first is found unfinished at its deadline (overloaded), or None once all have finished."""
    loop = asyncio.get_running_loop()
    pending = set(tasks)
    for d, task in sorted(zip(due, tasks), key=lambda x: x[0]):
        if not pending:
            break
        if not task.done():
            _, pending = await asyncio.wait(pending, timeout=max(0.0, d - loop.time()))
            if not task.done():
                return loop.time()
    return None


async def hold_window(measured: list[Any], due: list[float], sampler: Any, end: float) -> float | None:
    """Watch the window's programs against their deadlines (watch); when none overran, keep the load on
    until `end` (the trace's last arrival) and let the window's probe finish. The time a program
    overran, or None."""
    stopped = await watch(measured, due)
    if stopped is None:  # keep the load on until the trace's last arrival, then end the window's probe
        await asyncio.sleep(max(0.0, end - asyncio.get_running_loop().time()))
        await sampler
    return stopped


async def started(engine: Any, policy: str) -> Any:
    """teola's runtime on `engine`, started, under a fresh `policy` (program policies count service in
    model seconds, Autellix's unit)."""
    from teola.runtime import Runtime
    from teola.scheduling.registry import make_policy

    rt = Runtime({"llm": engine})
    await rt.start()
    rt.schedulers["llm"].policy = make_policy(policy, **({} if policy == "fcfs" else {"service": "seconds"}))
    return rt


async def run_window(
    job: dict[str, Any],
    engine: Any,
    policy: str,
    llm: dict[str, Any],
    progs: list[Any],
    solos: list[float],
    trace: Trace,
) -> dict[str, Any]:
    """The programs of one point on teola's runtime (in virtual time): each program's latency (None if
    unfinished), every call's record, the window's probe, and when a measured program overran, when."""
    from teola.sim.program_runs import load_texts, run_program

    questions, filler, _ = load_texts()
    rt = await started(engine, policy)
    loop = asyncio.get_running_loop()
    t0, log = loop.time(), []
    probe = WindowProbe(rt, trace, max(0.25, trace.window / 400))
    sampler = asyncio.ensure_future(probe.run(t0))
    tasks = [
        asyncio.ensure_future(
            run_program(
                rt,
                p,
                t0,
                f"{job['kind']}-{job['system']}",
                questions,
                None,
                log,
                filler=filler,
                token_ratio=llm.get("token_ratio", 1.3),
            )
        )
        for p in progs
    ]
    window = [(t, p, s) for t, p, s in zip(tasks, progs, solos) if trace.measured(p.arrival)]
    due = deadlines(
        [t0 + p.arrival for _, p, _ in window],
        [s for _, _, s in window],
        job.get("overdue", OVERDUE),
        job.get("overdue_floor", 0.0),
    )
    stopped: float | None = None
    try:
        stopped = await hold_window([t for t, _, _ in window], due, sampler, t0 + trace.horizon)
    finally:
        sampler.cancel()
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, sampler, return_exceptions=True)
        await rt.stop()
    lats = [t.result() if t.done() and not t.cancelled() and t.exception() is None else None for t in tasks]
    return {
        "lats": lats,
        "log": log,
        "mechanism": probe.summary(),
        "stopped": None if stopped is None else stopped - t0,
    }


def run_point(job: dict[str, Any]) -> dict[str, Any]:
    """One (workload, system, rate) point on trace job["trace"] (warm-up, window, cool-down seconds);
    job["overdue"]: x a program's own unloaded latency a measured program may take (module docstring)."""
    from bench.studies.sim.sim_steady_solo import cost_of, solo_latency
    from teola.sim.virtual_loop import run_virtual

    trace = Trace(*job["trace"])
    engine, policy, llm = _runtime(job)
    progs = trace_programs(job["kind"], job["rate"], trace.horizon, job.get("seed", 1))
    cost, chunk, template = cost_of(sim_autellix._profile(job["profile"]))
    solos = [solo_latency(p, cost, chunk, template) for p in progs]

    wall = time.perf_counter()
    res = run_virtual(run_window(job, engine, policy, llm, progs, solos, trace))
    out = {k: job[k] for k in ("kind", "system", "load", "rate")}
    out.update(summarize(progs, res["lats"], res["log"], trace, solos))
    out["mechanism"] = res["mechanism"]
    out["overloaded_at"] = res["stopped"]
    out["sim_wall_s"] = time.perf_counter() - wall
    print(
        f"[sim_steady] {job['kind']} {job['system']} load {job['load']:g}: {out['measured']} measured, "
        f"{out['unfinished']} unfinished, token latency {1000 * out['tok_mean']:.0f} ms, mean "
        f"{out['mean']:.1f} s, steady {out['steady']} ({out['sim_wall_s']:.0f} s wall)",
        file=sys.stderr,
        flush=True,
    )
    return out


def summarize(
    progs: list[Any],
    lats: list[float | None],
    log: list[dict[str, Any]],
    trace: Trace,
    solos: list[float] | None = None,
) -> dict[str, Any]:
    """The window's statistics: programs measured and unfinished, mean latency and Autellix's token
    latency (a program's latency over the tokens it decoded; inf when a measured program is unfinished),
    the steady-state test, calls and decoded tokens of the measured programs, and with `solos` (each
    program's own unloaded latency) the finished ones' stretch (latency / own unloaded): mean and max."""
    decoded: dict[str, int] = {}
    for c in log:
        decoded[c["program"]] = decoded.get(c["program"], 0) + (c["output"] or 0)
    arrivals = [p.arrival for p in progs]
    ends = [a + lat if lat is not None else None for a, lat in zip(arrivals, lats)]
    meas = [(p, lat) for p, lat in zip(progs, lats) if trace.measured(p.arrival)]
    done = [(p, lat) for p, lat in meas if lat is not None]
    unfinished = len(meas) - len(done)
    tok = [lat / decoded[p.pid] for p, lat in done if decoded.get(p.pid)]
    return {
        "programs": len(progs),
        "measured": len(meas),
        "unfinished": unfinished,
        "mean": statistics.mean(x[1] for x in done) if done and not unfinished else math.inf,
        "tok_mean": statistics.mean(tok) if tok and not unfinished else math.inf,
        "finished_mean": statistics.mean(x[1] for x in done) if done else math.nan,
        "calls": sum(len(p.calls) for p, _ in meas),
        "decoded": sum(decoded.get(p.pid, 0) for p, _ in meas),
        **stretch(progs, lats, solos, trace),
        **steady(arrivals, ends, trace),
    }


def stretch(
    progs: list[Any], lats: list[float | None], solos: list[float] | None, trace: Trace
) -> dict[str, Any]:
    """The measured, finished programs' latency over their own unloaded latency: mean and max (nan
    without `solos`), and the measured programs' mean own unloaded latency."""
    if solos is None:
        return {}
    meas = [(lat, s) for p, lat, s in zip(progs, lats, solos) if trace.measured(p.arrival)]
    r = [lat / s for lat, s in meas if lat is not None and s > 0]
    return {
        "stretch_mean": statistics.mean(r) if r else math.nan,
        "stretch_max": max(r, default=math.nan),
        "solo_mean": statistics.mean(s for _, s in meas) if meas else math.nan,
    }
