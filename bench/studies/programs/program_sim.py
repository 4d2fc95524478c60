"""A deterministic, step-level simulator of LLM engine instances serving multi-call programs.

It models what the program-aware policies are about, not a specific GPU: each instance runs
iteration-level (continuous) batching with at most `max_batch` running calls; one decode step
decodes one token for every running call and lasts

    step_time = t_step + t_seq * running + t_prefill * prefill_tokens_started_this_step

where a call's prefill tokens are its prompt tokens not already in the instance's prefix cache
(an LRU of per-program contexts plus a system prompt shared by all programs). Scheduling:
  - "fcfs": calls start in arrival order and are never preempted (vLLM's default);
  - "mlfq" / "plas" / "atlas": `ProgramQueues` (with the policy's priority function) ranks calls; free slots
    are filled in rank order and, when the policy re-ranks (multi-step), a queued call preempts the
    worst running call if its queue is strictly higher (vLLM priority scheduling). Preemption
    itself is free here (KV is assumed swapped, not recomputed): optimistic for preemptive policies.
Service is charged in engine seconds (every running call gets each step's duration), waiting time
in seconds queued. Calls are routed to an instance when released, by a balancer's `route`.
Nothing here reads a clock, so results are exactly reproducible.

No study runs it any more (bench.studies.programs.programs runs teola's runtime on simulated vLLM in virtual time,
teola/sim); it is kept as the unit-step model of the policies' hand-computed tests (Autellix's
Figure 2 and anti-starvation, tests/unit/scheduling/test_program_policies.py) until they run on the
runtime too.
"""
from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from teola.runtime import ProgramQueues, policy_factory
from teola.scheduling.process_table import ProcessTable
from teola.sim.program_workloads import CallSpec, ProgramSpec


@dataclass(slots=True, eq=False)
class SimCall:
    pid: str
    idx: int
    spec: CallSpec
    seq: int
    released: float
    inst: SimInstance | None = None
    left: int = 0
    started: bool = False
    wait: float = 0.0
    finished: float | None = None


@dataclass(slots=True, eq=False)
class SimInstance:
    index: int
    max_batch: int
    cache_capacity: int
    clock: float = 0.0
    queued: list[SimCall] = field(default_factory=list)
    running: list[SimCall] = field(default_factory=list)
    cache: OrderedDict = field(default_factory=OrderedDict)
    steps: int = 0
    prefill_tokens: int = 0
    cached_tokens: int = 0

    @property
    def outstanding(self) -> int:
        return len(self.queued) + len(self.running)


@dataclass
class SimResult:
    latencies: dict[str, float]
    total_wait: float
    makespan: float
    preemptions: int
    prefill_tokens: int
    cached_tokens: int
    completion: dict[str, float]


class Simulator:
    """Runs `programs` to completion under one policy and one balancer; `run()` -> SimResult."""

    def __init__(self, programs: list[ProgramSpec], policy: str = "fcfs", instances: int = 1,
                 max_batch: int = 8, t_step: float = 0.02, t_seq: float = 0.001, t_prefill: float = 0.0001,
                 system_prompt: int = 0, cache_capacity: int = 1 << 30, balancer: Any = None,
                 policy_options: dict[str, Any] | None = None) -> None:
        if policy not in ("fcfs", "mlfq", "plas", "atlas"):
            raise ValueError(f"simulator policy must be fcfs, mlfq, plas or atlas, got {policy!r}")
        if any(c.pause for p in programs for c in p.calls):
            raise ValueError("simulator: calls with tool pauses (react programs) need bench.studies.sim.sim_programs' runtime "
                             "on virtual time, not this pure simulator")
        self.programs = sorted(programs, key=lambda p: p.arrival)
        self.policy = policy
        self.table = ProcessTable()
        self.core = None if policy == "fcfs" else ProgramQueues(policy_factory(policy).priority, self.table, **(policy_options or {}))
        self.instances = [SimInstance(i, max_batch, cache_capacity) for i in range(instances)]
        self.t_step, self.t_seq, self.t_prefill = t_step, t_seq, t_prefill
        self.system_prompt = system_prompt
        if balancer is None:
            from teola.balancers import LeastUsed
            balancer = LeastUsed()
        if getattr(balancer, "table", None) is not None:
            balancer.table = self.table
        self.balancer = balancer
        self._seq = 0
        self.preemptions = 0

    # ---- program progress ---------------------------------------------------------------------
    def _release(self, prog: ProgramSpec, idx: int, now: float) -> None:
        spec = prog.calls[idx]
        c = SimCall(prog.pid, idx, spec, self._seq, now, left=spec.output)
        self._seq += 1
        inst = self.balancer.route(self.instances, prog.pid, spec.prompt)
        c.inst = inst
        inst.queued.append(c)
        if self.core is not None:
            parents = tuple(f"c{p}" for p in spec.parents)
            self.core.admit(c, prog.pid, f"c{idx}", now, parents)
        else:
            self.table.call_arrived(prog.pid, f"c{idx}", now, None)

    def run(self) -> SimResult:
        progs = {p.pid: p for p in self.programs}
        done_calls: dict[str, set[int]] = {p.pid: set() for p in self.programs}
        released: dict[str, set[int]] = {p.pid: set() for p in self.programs}
        completion: dict[str, float] = {}
        arrivals = list(self.programs)
        ai = 0
        total_wait = 0.0
        # the instance whose next step starts earliest goes next (ties: lower index)
        while len(completion) < len(progs):
            busy = [i for i in self.instances if i.outstanding]
            t_next = min((i.clock for i in busy), default=None)
            if ai < len(arrivals) and (t_next is None or arrivals[ai].arrival <= t_next):
                prog = arrivals[ai]
                ai += 1
                for i in self.instances:
                    if not i.outstanding:
                        i.clock = max(i.clock, prog.arrival)
                for idx, cs in enumerate(prog.calls):
                    if not cs.parents:
                        released[prog.pid].add(idx)
                        self._release(prog, idx, prog.arrival)
                continue
            if t_next is None:
                raise AssertionError("simulator: no work and no arrivals but programs unfinished")
            inst = min(busy, key=lambda i: (i.clock, i.index))
            finished = self._step(inst)
            for c in finished:
                prog = progs[c.pid]
                done_calls[c.pid].add(c.idx)
                total_wait += c.wait
                for j, cs in enumerate(prog.calls):
                    if j not in released[c.pid] and all(p in done_calls[c.pid] for p in cs.parents):
                        released[c.pid].add(j)
                        self._release(prog, j, inst.clock)
                if len(done_calls[c.pid]) == len(prog.calls):
                    completion[c.pid] = inst.clock
                    if self.core is not None:
                        self.core.end_program(c.pid)
                    else:
                        self.table.end_program(c.pid)
            for i in self.instances:  # idle instances catch up with the clock of the busy ones
                if not i.outstanding:
                    i.clock = max(i.clock, inst.clock)
        lat = {pid: completion[pid] - progs[pid].arrival for pid in progs}
        return SimResult(lat, total_wait, max(completion.values()) - self.programs[0].arrival, self.preemptions,
                         sum(i.prefill_tokens for i in self.instances), sum(i.cached_tokens for i in self.instances),
                         completion)

    # ---- one decode step on one instance --------------------------------------------------------
    def _choose(self, inst: SimInstance) -> None:
        if self.core is None:
            inst.queued.sort(key=lambda c: (c.released, c.seq))
            while inst.queued and len(inst.running) < inst.max_batch:
                inst.running.append(inst.queued.pop(0))
            return
        core = self.core
        for c in inst.queued:
            core.starving(c)
        before = core.reranks
        order = core.rank(inst.running + inst.queued)
        running = set(inst.running)
        waiting = [c for c in order if c not in running]
        while waiting and len(inst.running) < inst.max_batch:
            c = waiting.pop(0)
            inst.running.append(c)
        if core.reranks != before:
            for c in waiting:
                worst = max(inst.running, key=lambda r: (core.level(r), r.seq))
                if core.level(c) < core.level(worst):
                    inst.running.remove(worst)
                    inst.running.append(c)
                    self.preemptions += 1
                else:
                    break
        chosen = set(inst.running)
        inst.queued = [c for c in order if c not in chosen]

    def _step(self, inst: SimInstance) -> list[SimCall]:
        self._choose(inst)
        prefill = 0
        for c in inst.running:
            if not c.started:
                c.started = True
                cached = self._cached(inst, c)
                prefill += c.spec.prompt - cached
                inst.cached_tokens += cached
        inst.prefill_tokens += prefill
        dt = self.t_step + self.t_seq * len(inst.running) + self.t_prefill * prefill
        inst.clock += dt
        inst.steps += 1
        for c in inst.queued:
            c.wait += dt
            if self.core is not None:
                self.core.wait(c, dt)
        finished = []
        for c in inst.running:
            c.left -= 1
            if self.core is not None:
                self.core.charge(c, dt)
            if c.left <= 0:
                finished.append(c)
        for c in sorted(finished, key=lambda c: c.seq):
            inst.running.remove(c)
            c.finished = inst.clock
            self._remember(inst, c)
            if self.core is not None:
                self.core.finish(c, inst.clock)
            else:
                self.table.call_finished(c.pid, f"c{c.idx}", inst.clock)
        return sorted(finished, key=lambda c: c.seq)

    # ---- prefix cache ---------------------------------------------------------------------------
    def _cached(self, inst: SimInstance, c: SimCall) -> int:
        have = inst.cache.get(c.pid, 0)
        if have:
            inst.cache.move_to_end(c.pid)
        return min(c.spec.prompt, max(have, self.system_prompt))

    def _remember(self, inst: SimInstance, c: SimCall) -> None:
        inst.cache[c.pid] = max(inst.cache.get(c.pid, 0), c.spec.prompt + c.spec.output)
        inst.cache.move_to_end(c.pid)
        while sum(inst.cache.values()) > inst.cache_capacity and len(inst.cache) > 1:
            inst.cache.popitem(last=False)


def simulate(programs: list[ProgramSpec], policy: str, **options: Any) -> SimResult:
    """Shorthand for `Simulator(programs, policy, **options).run()`."""
    return Simulator(programs, policy, **options).run()
