"""An engine that tells what reached it: each request's `text` names an environment variable, and the
answer is {"env": its value in the engine's process (None if unset), "options": the adapter's options}.
Loaded by import path, it runs in a Ray actor like any engine (tests of what the Ray executor forwards)."""

from __future__ import annotations

import os
from typing import Any

from engines.protocol import EngineProfile

PROBE = "tests.support.env_probe:EnvProbe"


class EnvProbe:
    ops = frozenset({"embedding"})

    def __init__(self, name: str, **options: Any) -> None:
        self.name = name
        self.options = options
        self.profile = EngineProfile()

    async def start(self) -> None:
        pass

    async def stop(self) -> None:
        pass

    async def execute(self, op: str, requests: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [{"env": os.environ.get(r["text"]), "options": self.options} for r in requests]
