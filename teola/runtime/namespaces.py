"""The vector-store namespaces of a runtime's queries: a generated namespace is dropped when its
query ends; a kept one (config "namespace") receives its query's documents through a staging
namespace, published when the query succeeds and dropped when it fails (teola.runtime.staging);
a kept namespace is dropped only when asked (`Namespaces.drop`)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from typing import Any

from engines.protocol import Capability
from teola.runtime.errors import QueryError
from teola.runtime.executors.executor import Executor, Instance
from teola.runtime.metrics import Metrics
from teola.runtime.staging import Staging, plan_staging, staged_rows

log = logging.getLogger("teola.runtime")

PUBLISH = Capability.PUBLISH_NAMESPACE


class Namespaces:
    """Drops, stages and publishes namespaces on one runtime's vector stores. `instances`: the
    runtime's engine -> instances (read when called, so restarts and late starts are seen);
    `tasks`: the runtime's background work, which `Runtime.stop` and `wait_idle` wait for."""

    def __init__(
        self,
        executor: Executor,
        instances: dict[str, list[Instance]],
        metrics: Metrics,
        tasks: set[asyncio.Task],
    ) -> None:
        self.executor = executor
        self.instances = instances
        self.metrics = metrics
        self.tasks = tasks
        self.warned: set[str] = set()

    def stores(self, engines: Iterable[str]) -> list[Instance]:
        """The instances of these engines whose adapters keep namespaces (drop_namespace)."""
        return [
            inst
            for eng in sorted(engines)
            for inst in self.instances.get(eng, ())
            if Capability.DROP_NAMESPACE in inst.capabilities
        ]

    async def drop(self, namespace: str) -> int:
        """Delete `namespace` from every instance that stores namespaces; returns how many were asked."""
        stores = self.stores(self.instances)
        for inst in stores:
            await self.executor.call(inst, Capability.DROP_NAMESPACE, namespace)
        return len(stores)

    # ---- staging ---------------------------------------------------------------------------------
    def can_publish(self, engine: str) -> bool:
        insts = self.instances.get(engine, ())
        return bool(insts) and all(PUBLISH in i.capabilities for i in insts)

    def stage(self, run: Any, config: dict[str, Any]) -> None:
        """Before it starts, give a query that keeps its documents its staging: its ingestion
        requests write there, its searches read there too (teola.runtime.requests), and a failure
        drops it. Engines that cannot publish get direct writes, logged once per engine."""
        staging, direct = plan_staging(
            run.qid, config.get("namespace"), run.plan.ingest_engines, self.can_publish
        )
        for eng in direct:
            if eng not in self.warned:
                self.warned.add(eng)
                log.warning(
                    "engine %r cannot publish a staging namespace (its adapter has no %s): documents "
                    "kept in a namespace are written to it batch by batch, so a process killed during "
                    "ingestion can leave part of a document there",
                    eng,
                    PUBLISH,
                )
        if staging is not None:
            run.staging, run.needs_cleanup = staging, True
            run.values["sys.staging"] = staging.by_engine()

    async def publish(self, run: Any) -> None:
        """Publish a succeeded query's staged documents; shielded, so a caller that goes away once
        the answer is out does not stop it half-way. Raises QueryError when it fails."""
        task = asyncio.get_running_loop().create_task(self._publish(run.staging, run.trace_list()))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)
        await asyncio.shield(task)

    async def _publish(self, staging: Staging, trace: list[dict[str, Any]]) -> None:
        """On one instance of each staged engine (its instances share one table); a failure drops
        the staged rows and raises QueryError naming the engine."""
        for eng in staging.engines:
            insts = self.instances.get(eng) or []
            inst = next((i for i in insts if i.healthy), insts[0] if insts else None)
            try:
                if inst is None:
                    raise RuntimeError(f"engine {eng!r} has no instance")
                await self.executor.call(
                    inst, PUBLISH, staging.name, staging.namespace, staged_rows(trace, eng)
                )
            except Exception as e:
                await self._discard(staging)
                raise QueryError(
                    f"query {staging.query_id}: its documents were not kept in namespace "
                    f"{staging.namespace!r}: publishing them on engine {eng!r} failed: "
                    f"{type(e).__name__}: {e}",
                    staging.query_id,
                    None,
                    eng,
                    list(trace),
                ) from e

    # ---- clean-up --------------------------------------------------------------------------------
    def spawn_cleanup(self, run: Any) -> None:
        """`cleanup` in the background (a failed query's, once none of its batches still runs)."""
        task = asyncio.get_running_loop().create_task(self.cleanup(run))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def cleanup(self, run: Any) -> None:
        """Drop a query's generated namespace, or its staging namespace, from the vector stores it
        ingested into. A failure is logged and counted (`metrics.cleanup_failures`): the query's
        answer stands, and staged rows left behind stay invisible."""
        if run.staging is not None:
            await self._discard(run.staging)
            return
        ns = run.values.get("sys.namespace")
        for inst in self.stores(run.plan.ingest_engines):
            await self._drop_logged(inst, ns, run.qid)

    async def _discard(self, staging: Staging) -> None:
        for inst in self.stores(staging.engines):
            await self._drop_logged(inst, staging.name, staging.query_id)

    async def _drop_logged(self, inst: Instance, namespace: str, qid: str) -> None:
        try:
            await self.executor.call(inst, Capability.DROP_NAMESPACE, namespace)
        except Exception as e:
            self.metrics.cleanup_failures += 1
            log.warning(
                "query %s: dropping namespace %r on %s failed: %s: %s",
                qid,
                namespace,
                inst.name,
                type(e).__name__,
                e,
            )
