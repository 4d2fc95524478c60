"""A started engine lent to a test runtime: the runtime's start/stop leave it running (so a
session-scoped engine fixture serves many runtimes), and every request it runs is recorded."""

from __future__ import annotations

from typing import Any


class Borrowed:
    def __init__(self, engine: Any) -> None:
        self.engine = engine
        self.name, self.ops, self.profile = engine.name, engine.ops, engine.profile
        self.requests: list[dict[str, Any]] = []

    async def start(self) -> None:
        pass

    async def stop(self) -> None:
        pass

    async def execute(self, op: str, requests: list[dict[str, Any]]) -> list[Any]:
        self.requests.extend(dict(r) for r in requests)
        return await self.engine.execute(op, requests)

    def stream(self, op: str, requests: list[dict[str, Any]]) -> Any:
        self.requests.extend(dict(r) for r in requests)
        return self.engine.stream(op, requests)

    async def abort(self, keys: list[str]) -> int:
        return await self.engine.abort(keys)

    def __getattr__(self, name: str) -> Any:
        # everything else is the engine's own (its renderer, max_model_len, step counts, ...)
        return getattr(self.engine, name)
