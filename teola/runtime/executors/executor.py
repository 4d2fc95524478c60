"""Where engine instances live and how batches reach them. The engine schedulers talk only to an
`Executor`, so a Ray executor (instances as actors on other machines) can replace the in-process
one without touching schedulers, policies or passes: requests and results are plain data."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, Protocol

from engines.machine.op_costs import OpCost
from engines.protocol import Capability, EngineProfile, StreamEvent
from teola.ir.engine_spec import Engine


@dataclass(slots=True, eq=False, kw_only=True)
class Instance:
    """One engine instance as the schedulers see it.

    handle: executor-specific (the adapter object locally, an actor handle on Ray).
    max_inflight: batches it may run at once (1 = one batch at a time, like one GPU stream).
    outstanding / tokens / inflight: requests, estimated LLM tokens and batches in flight (load).
    healthy: False while it is down and being restarted (teola.runtime.engine_tier.supervisor).
    capabilities: the adapter's optional methods (engines.protocol.Capability), read once at launch."""

    engine: str
    index: int
    handle: Any
    profile: EngineProfile
    max_inflight: int = 1
    outstanding: int = 0
    tokens: int = 0
    inflight: int = 0
    healthy: bool = True
    capabilities: frozenset[Capability] = frozenset()

    @property
    def name(self) -> str:
        return f"{self.engine}/{self.index}"

    @property
    def op_costs(self) -> dict[str, OpCost]:
        """The op costs the instance reported at start (EngineProfile.op_costs), typed."""
        return {op: OpCost.from_dict(c) for op, c in self.profile.op_costs.items()}


class Executor(Protocol):
    """Runs engine instances. All methods are called from the runtime's event loop.

    parallel_launch: whether instances of different engines may be launched at once (each runs in
    its own process, so one's start cannot disturb another's: teola.runtime.launch)."""

    parallel_launch: bool

    async def launch(self, spec: Engine, index: int, backend: Any | None) -> Instance:
        """Build (unless `backend` is given) and start instance `index` of `spec`."""
        ...

    async def execute(self, instance: Instance, op: str, requests: list[dict[str, Any]]) -> list[Any]:
        """One batch of same-op requests -> one result per request, in order (EngineBackend.execute)."""
        ...

    def stream(
        self, instance: Instance, op: str, requests: list[dict[str, Any]]
    ) -> AsyncIterator[tuple[int, StreamEvent, Any]]:
        """Streaming decode (EngineBackend.stream): (request index, "item" | "final", payload)."""
        ...

    async def call(self, instance: Instance, method: Capability, *args: Any) -> Any:
        """Call an optional adapter method, one of `instance.capabilities`."""
        ...

    async def restart(self, instance: Instance) -> None:
        """Stop the instance's adapter (errors of a dead one ignored) and start it again, in place."""
        ...

    async def shutdown(self, instance: Instance) -> None: ...


def checked_results(engine: str, results: Any, n: int) -> list[Any]:
    """`results` of an engine call for `n` requests, or RuntimeError naming `engine` when it did not
    return a list of one result per request."""
    if not isinstance(results, list) or len(results) != n:
        got = len(results) if isinstance(results, list) else type(results).__name__
        raise RuntimeError(f"engine {engine!r} returned {got} results for {n} request{'s' if n != 1 else ''}")
    return results
