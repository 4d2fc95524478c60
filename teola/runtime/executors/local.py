"""The default executor: engine adapters in this process, called on the runtime's event loop."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from engines.protocol import Capability, EngineProfile, StreamEvent, capabilities_of, restart_adapter
from engines.registry import create_engine
from engines.tuning.settings import resolve_options
from teola.ir.engine_spec import Engine
from teola.runtime.executors.executor import Instance

_RESTARTS: dict[int, asyncio.Future] = {}  # id(adapter) -> its restart in progress, across runtimes


class LocalExecutor:
    """Instances are adapter objects (engines.protocol.EngineBackend) in this process. A backend
    passed in is used as given (it may be shared by several instances); otherwise the adapter is
    built with `engines.registry.create_engine` from the spec's options over the settings chosen for
    this machine (engines.tuning.settings: hardware defaults < `teola tune` values < explicit).
    Engines start one after another (teola.runtime.launch says why)."""

    parallel_launch = False

    def __init__(self) -> None:
        self._started: list[Any] = []

    async def launch(self, spec: Engine, index: int, backend: Any | None) -> Instance:
        if backend is None:
            backend = create_engine(
                spec.name,
                spec.kind,
                resolve_options(spec.kind, spec.instance_options(index), index, spec.instances),
            )
        missing = [m for m in ("execute", "start", "stop") if not callable(getattr(backend, m, None))]
        if missing:
            raise TypeError(
                f"engine {spec.name!r}: backend {backend!r} lacks {missing} "
                "(it must implement engines.protocol.EngineBackend)"
            )
        if not any(b is backend for b in self._started):
            await backend.start()
            self._started.append(backend)
        profile = getattr(backend, "profile", None)
        if not isinstance(profile, EngineProfile):
            profile = EngineProfile(
                max_batch=spec.max_batch,
                max_efficient_batch=spec.max_efficient_batch,
                token_budget=spec.token_budget,
            )
        return Instance(
            engine=spec.name,
            index=index,
            handle=backend,
            profile=profile,
            capabilities=capabilities_of(backend),
        )

    async def execute(self, instance: Instance, op: str, requests: list[dict[str, Any]]) -> list[Any]:
        return await instance.handle.execute(op, requests)

    def stream(
        self, instance: Instance, op: str, requests: list[dict[str, Any]]
    ) -> AsyncIterator[tuple[int, StreamEvent, Any]]:
        if Capability.STREAM not in instance.capabilities:
            raise TypeError(
                f"engine {instance.engine!r} cannot stream (its adapter has no stream()); "
                "turn decode pipelining off for it with {'passes': {'decode_pipelining': False}}"
            )
        return instance.handle.stream(op, requests)

    async def call(self, instance: Instance, method: Capability, *args: Any) -> Any:
        result = getattr(instance.handle, method)(*args)
        if hasattr(result, "__await__"):
            result = await result
        return result

    async def restart(self, instance: Instance) -> None:
        # an adapter shared by several apps' runtimes (teola.api.shared_engines) is restarted once: a
        # second supervisor that finds it down joins the restart in progress
        key = id(instance.handle)
        running = _RESTARTS.get(key)
        if running is None:
            running = asyncio.ensure_future(self._restart(instance))
            _RESTARTS[key] = running
            running.add_done_callback(lambda _: _RESTARTS.pop(key, None))
        await asyncio.shield(running)

    @staticmethod
    async def _restart(instance: Instance) -> None:
        backend = instance.handle
        if getattr(type(backend), "restart", None) is not None:  # SharedBackend: for every app using it
            await backend.restart()
        else:
            await restart_adapter(backend)

    async def shutdown(self, instance: Instance) -> None:
        backend = instance.handle
        if any(b is backend for b in self._started):
            self._started = [b for b in self._started if b is not backend]
            await backend.stop()
