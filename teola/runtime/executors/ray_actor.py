"""The engine actor: what runs inside each Ray actor process of the Ray executor
(teola.runtime.executors.ray), holding one engine adapter."""

from __future__ import annotations

import asyncio
import dataclasses
import os
from typing import Any

from engines.protocol import EngineProfile, capabilities_of, restart_adapter
from teola.runtime.executors.ray_data import resolve_inputs, split_results


class SecretsMissing(RuntimeError):
    """The actor was restarted by Ray (its process or node died) and has not been given the
    secrets its engine needs again: the driver sends them with `acquire` before any other work."""


class EngineActor:
    """Wrapped with `ray.remote` at launch. The adapter is built and started lazily, so a restarted
    actor comes back on its own. `holders` counts the runtimes using it (`acquire` / `release`): an
    actor shared by several apps stops its adapter with the last.

    sealed: the engine needs secrets (teola.runtime.executors.ray_env.secrets_for), which never
    travel in the constructor's arguments (Ray stores those): they come with `acquire`, and until
    then, after a restart too, the adapter is not built (`SecretsMissing`)."""

    def __init__(
        self, name: str, kind: str, options: dict[str, Any], backend: Any = None, sealed: bool = False
    ) -> None:
        self.name = name
        self.kind = kind
        self.options = dict(options)
        self.backend = backend
        self.sealed = sealed
        self.started = False
        self.holders = 0
        self._starting = asyncio.Lock()

    async def _ready(self) -> Any:
        if not self.started:
            if self.sealed:
                raise SecretsMissing(f"engine actor {self.name!r} restarted and waits for its secrets")
            async with self._starting:  # runtimes sharing the actor may ask at once
                if not self.started:
                    if self.backend is None:
                        from engines.registry import create_engine

                        self.backend = create_engine(self.name, self.kind, dict(self.options))
                    await self.backend.start()
                    self.started = True
        return self.backend

    async def acquire(self, secrets: dict[str, Any] | None = None) -> dict[str, Any]:
        """One more runtime uses this actor: its secrets ({"env": ..., "options": ...}) are applied,
        its adapter is started; what `start` tells."""
        if secrets:
            os.environ.update(secrets["env"])
            self.options.update(secrets["options"])
            self.sealed = False
        info = await self.start()
        self.holders += 1
        return info

    async def release(self) -> int:
        """A runtime is done with this actor: the adapter stops with the last one. The holders left."""
        self.holders = max(0, self.holders - 1)
        if self.holders == 0:
            await self.stop()
        return self.holders

    async def start(self) -> dict[str, Any]:
        backend = await self._ready()
        import ray

        profile = getattr(backend, "profile", None)
        # the whole profile crosses, so a remote instance is scheduled as a local one would be
        # (context window, max_inflight included)
        return {
            "pid": os.getpid(),
            "node_id": ray.get_runtime_context().get_node_id(),
            "profile": dataclasses.asdict(profile) if isinstance(profile, EngineProfile) else None,
            "methods": sorted(c.value for c in capabilities_of(backend)),
        }

    async def restart(self) -> None:
        """Stop the adapter (errors of a dead one ignored) and start it again in this actor."""
        if self.backend is None or not self.started:
            await self._ready()
            return
        await restart_adapter(self.backend)

    async def execute(self, op: str, requests: list[dict[str, Any]]) -> list[Any]:
        """Run a batch, with the refs among the requests' fields resolved
        (teola.runtime.executors.ray_data)."""
        return await (await self._ready()).execute(op, await resolve_inputs(requests))

    async def execute_split(self, op: str, requests: list[dict[str, Any]], min_ref_bytes: int):
        """`execute` with two return values: the results to send back and those of requests marked
        to stay in the object store (teola.runtime.executors.ray_data.split_results)."""
        return split_results(requests, await self.execute(op, requests), min_ref_bytes)

    async def stream(self, op: str, requests: list[dict[str, Any]]):
        async for event in (await self._ready()).stream(op, await resolve_inputs(requests)):
            yield event

    async def call(self, method: str, *args: Any) -> Any:
        result = getattr(await self._ready(), method)(*args)
        if hasattr(result, "__await__"):
            result = await result
        return result

    async def stop(self) -> None:
        if self.started:
            self.started = False
            await self.backend.stop()

    def where(self) -> dict[str, Any]:
        import ray

        return {"pid": os.getpid(), "node_id": ray.get_runtime_context().get_node_id()}
