"""Engines shared by several apps in one process: apps that register the same engine (same kind
and options) use one adapter, so a server with four apps loads the LLM once."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterable
from typing import Any

from engines.protocol import restart_adapter


class SharedBackend:
    """An engine adapter used by several apps: started by the first `start()`, stopped by the
    last `stop()`; everything else is the adapter's own."""

    def __init__(self, backend: Any) -> None:
        self.backend = backend
        self.refs = 0
        self._lock = asyncio.Lock()

    async def start(self) -> None:
        async with self._lock:
            if self.refs == 0:
                await self.backend.start()
            self.refs += 1

    async def stop(self) -> None:
        async with self._lock:
            if self.refs == 0:
                return
            self.refs -= 1
            if self.refs == 0:
                await self.backend.stop()

    async def restart(self) -> None:
        """Stop and start the adapter for every app using it (after it died); errors of stopping a
        dead adapter are ignored."""
        async with self._lock:
            await restart_adapter(self.backend)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.backend, name)


def share_engines(apps: Iterable[Any]) -> int:
    """Give apps that declare the same engine (kind + options + instance count) one shared adapter.
    Only apps not yet started, running in-process, and engines without a given backend take part.
    Returns how many adapters are now shared by more than one app."""
    from engines.registry import create_engine
    from engines.tuning.settings import resolve_options

    groups: dict[str, list[tuple[Any, str]]] = {}
    for app in apps:
        runtime_cfg = (getattr(app, "config", {}) or {}).get("runtime", {}) or {}
        if getattr(app, "runtime", None) is not None or runtime_cfg.get("executor", "local") != "local":
            continue
        for name, spec in app.engines.items():
            if name in app.backends or spec.instances != 1:
                continue
            key = json.dumps([spec.kind, spec.options], sort_keys=True, default=repr)
            groups.setdefault(key, []).append((app, name))
    shared = 0
    for members in groups.values():
        if len(members) < 2:
            continue
        app0, name0 = members[0]
        spec = app0.engines[name0]
        backend = SharedBackend(
            create_engine(name0, spec.kind, resolve_options(spec.kind, spec.instance_options(0)))
        )
        for app, name in members:
            app.backends[name] = backend
        shared += 1
    return shared
