"""Service per level of a program policy's queues over a steady-state window (bench sim_steady's
mechanism): sampled with the window's other counters, for each queue the calls in it (waiting in
teola's queue, or running: admitted to the engine) and the service they were charged since they
last arrived or were promoted (the policy's unit: seconds by default). A policy without queues
(FCFS) gives nothing."""

from __future__ import annotations

from typing import Any

from teola.scheduling.program.policy import ProgramPolicy


class LevelProbe:
    """Sums, per queue index, over the samples taken: calls, calls running, their service."""

    def __init__(self) -> None:
        self.samples = 0
        self.calls: dict[int, int] = {}
        self.running: dict[int, int] = {}
        self.service: dict[int, float] = {}
        self.lows: list[float] = []

    def sample(self, sched: Any) -> None:
        policy = sched.policy
        if not isinstance(policy, ProgramPolicy):
            return
        core = policy.core
        self.lows = list(core.levels.lows)
        pre = sched.preemptor
        running = (
            {e for calls in pre.calls.values() for e, c in calls.items() if not c.stopping} if pre else set()
        )
        self.samples += 1
        for key, st in core.calls.items():
            self.calls[st.level] = self.calls.get(st.level, 0) + 1
            self.running[st.level] = self.running.get(st.level, 0) + (key in running)
            self.service[st.level] = self.service.get(st.level, 0.0) + st.service

    def summary(self) -> dict[str, Any]:
        """Per queue (from its index as a string): its range's start in the service unit, the mean
        calls in it, of them running, and their mean service."""
        if not self.samples:
            return {}
        n = self.samples
        return {
            str(i): {
                "from": self.lows[i] if i < len(self.lows) else None,
                "calls": self.calls[i] / n,
                "running": self.running.get(i, 0) / n,
                "service": self.service[i] / self.calls[i] if self.calls[i] else 0.0,
            }
            for i in sorted(self.calls)
        }
