"""What `Runtime.health` reports per engine: started, healthy, instances and the ones down with why,
queued entries, batches in flight and capacity, restarts so far and the engine's policy."""

from __future__ import annotations

from typing import Any

from teola.ir.engine_spec import Engine
from teola.runtime.engine_tier.engine_scheduler import EngineScheduler
from teola.runtime.engine_tier.supervisor import Supervisor
from teola.runtime.executors.executor import Instance


def engine_health(
    specs: dict[str, Engine],
    schedulers: dict[str, EngineScheduler],
    instances: dict[str, list[Instance]],
    supervisor: Supervisor | None,
) -> dict[str, dict[str, Any]]:
    """One entry per engine of `specs`; an engine without a scheduler has not started."""
    out: dict[str, dict[str, Any]] = {}
    for name in specs:
        sched = schedulers.get(name)
        insts = instances.get(name, [])
        status = {i.name: supervisor.status(i) for i in insts} if supervisor else {}
        down = {n: s["last_error"] for n, s in status.items() if not s["healthy"]}
        out[name] = {
            "started": sched is not None,
            "healthy": sched is not None and not down,
            "instances": [i.name for i in insts],
            "down": down,
            "restarts": sum(s["restarts"] for s in status.values()),
            "queued": sched.queued() if sched else 0,
            "inflight": sum(i.inflight for i in insts),
            "capacity": sum(i.max_inflight for i in insts),
            "policy": sched.policy.name if sched else None,
        }
    return out
