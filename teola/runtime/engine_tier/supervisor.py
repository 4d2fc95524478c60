"""Engine supervision: notice an engine instance that died and bring it back without a restart
of the server.

An instance is probed (its adapter's `health()`) every `interval` seconds and at once after a
batch on it fails; it is down when two probes in a row fail. An unhealthy instance is marked down
(`Instance.healthy = False`: schedulers give it no new batches, queued work waits for it), its in-flight
batches fail with `EngineDown` (queries answer 503 over HTTP), and it is restarted (`Executor.restart`: stop,
then start the adapter again, e.g. a new vLLM engine-core process) with exponential backoff until it is
healthy. Time is the event loop's, so a virtual clock drives this unchanged."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from engines.protocol import Capability
from teola.runtime.errors import EngineDown
from teola.runtime.executors.executor import Executor, Instance
from teola.runtime.metrics import Metrics

log = logging.getLogger("teola.runtime")

PROBE_TIMEOUT = 30.0  # seconds a health probe may take before the instance counts as down
RECHECK = 0.5  # a failed probe is repeated once after this many seconds: a busy engine (a saturated
# connection pool, a long batch) is not restarted for one slow answer


class Supervisor:
    """Probes and restarts the instances of a runtime. `kick(engine)` wakes an engine's scheduler
    when one of its instances is back; `backoff` is (first, max) seconds between restart attempts."""

    def __init__(
        self,
        executor: Executor,
        instances: dict[str, list[Instance]],
        metrics: Metrics,
        kick: Callable[[str], None],
        interval: float | None = 5.0,
        backoff: tuple[float, float] = (1.0, 30.0),
    ) -> None:
        self.executor = executor
        self.instances = instances
        self.metrics = metrics
        self.kick = kick
        self.interval = interval
        self.backoff = backoff
        self.restarts: dict[str, int] = {}
        self.last_error: dict[str, str] = {}
        self._restarting: dict[str, asyncio.Task] = {}
        self._probe_task: asyncio.Task | None = None
        self._closed = False

    def start(self) -> None:
        if self.interval and self._probe_task is None:
            self._probe_task = asyncio.get_running_loop().create_task(self._probe_loop())

    async def close(self) -> None:
        self._closed = True
        tasks = [t for t in (self._probe_task, *self._restarting.values()) if t is not None]
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._probe_task = None
        self._restarting.clear()

    # ---- probing ---------------------------------------------------------------------------------
    async def alive(self, inst: Instance, cause: BaseException | None = None) -> bool:
        """Probe `inst` now (after a failure on it); if it is down, start its restart. True if healthy."""
        if not inst.healthy:
            return False
        if isinstance(cause, EngineDown):  # the executor saw the instance's process die (a Ray actor)
            self._mark_down(inst, str(cause))
            return False
        error = await self._probe(inst)
        if error is not None:
            await asyncio.sleep(RECHECK)
            error = await self._probe(inst)
        if error is None:
            return True
        self._mark_down(inst, error if cause is None else f"{type(cause).__name__}: {cause}; probe: {error}")
        return False

    async def _probe(self, inst: Instance) -> str | None:
        """None if healthy, else why not."""
        if Capability.HEALTH not in inst.capabilities:
            return None
        try:
            # asyncio.timeout, not wait_for: on Python 3.11 wait_for can swallow a cancellation that
            # arrives as the probe finishes, and the probe loop would then never stop
            async with asyncio.timeout(PROBE_TIMEOUT):
                ok = await self.executor.call(inst, Capability.HEALTH)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            return f"health probe failed: {type(exc).__name__}: {exc}"
        return None if ok else "health probe answered unhealthy"

    async def _probe_loop(self) -> None:
        while not self._closed:
            await asyncio.sleep(self.interval)
            for insts in list(self.instances.values()):
                for inst in insts:
                    if inst.healthy and inst.name not in self._restarting:
                        await self.alive(inst)

    # ---- restarting ------------------------------------------------------------------------------
    def _mark_down(self, inst: Instance, why: str) -> None:
        inst.healthy = False
        self.last_error[inst.name] = why
        self.metrics.engine_failures += 1
        log.error("engine instance %s is down (%s); restarting it", inst.name, why)
        if inst.name not in self._restarting:
            task = asyncio.get_running_loop().create_task(self._restart(inst))
            self._restarting[inst.name] = task
            task.add_done_callback(lambda _: self._restarting.pop(inst.name, None))

    async def _restart(self, inst: Instance) -> None:
        delay, most = self.backoff
        attempt = 0
        while True:
            attempt += 1
            try:
                await self.executor.restart(inst)
                error = await self._probe(inst)
                if error is None:
                    break
                raise RuntimeError(error)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                self.last_error[inst.name] = f"restart attempt {attempt} failed: {type(exc).__name__}: {exc}"
                log.error(
                    "engine instance %s: restart attempt %d failed (%s: %s); next try in %.0f s",
                    inst.name,
                    attempt,
                    type(exc).__name__,
                    exc,
                    delay,
                )
                await asyncio.sleep(delay)
                delay = min(most, delay * 2)
        inst.healthy = True
        self.restarts[inst.name] = self.restarts.get(inst.name, 0) + 1
        self.metrics.engine_restarts += 1
        log.warning("engine instance %s is back after %d restart attempt(s)", inst.name, attempt)
        self.kick(inst.engine)

    def status(self, inst: Instance) -> dict[str, Any]:
        """healthy, restarting, restarts so far and the last error of one instance."""
        return {
            "healthy": inst.healthy,
            "restarting": inst.name in self._restarting,
            "restarts": self.restarts.get(inst.name, 0),
            "last_error": self.last_error.get(inst.name),
        }


def down_error(engine: str, inst: Instance, exc: BaseException) -> EngineDown:
    """The error in-flight work of a dead instance fails with."""
    err = EngineDown(
        f"engine {engine!r} instance {inst.name} went down while running this "
        f"({type(exc).__name__}: {exc}); teola is restarting it, retry shortly"
    )
    err.__cause__ = exc
    return err
