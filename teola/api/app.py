"""`App`: a template of components plus the engines they run on; compiles and runs queries."""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Callable, Iterable
from typing import Any

from engines.registry import backend_ranks_by
from teola.api.engine_costs import adopt_engine_costs
from teola.compile.compiler import Compiled, GraphCache, compile_query
from teola.compile.single_primitive import embedding_query
from teola.compile.template import placeholder_query, validate_template
from teola.ir.engine_spec import Engine
from teola.ir.node import Node
from teola.runtime import QueryError, Result, Runtime
from teola.telemetry import telemetry_from_env

log = logging.getLogger("teola")


class App:
    """An LLM application served by teola.

    >>> app = App("qa")
    >>> app.register_engine(Engine("llm", kind="vllm", model="smollm2-135m-instruct"))
    >>> app.update_template([Node("llm", engine="llm")])
    >>> compiled = app.compile({"question": "Hi?"})

    `set_sample(fn)` gives the app a realistic sample query (what `teola run` sends).
    """

    def __init__(self, name: str, config: dict[str, Any] | None = None) -> None:
        if not isinstance(name, str) or not name.replace("_", "").replace("-", "").isalnum():
            raise ValueError(f"App name must be letters, digits, '_' or '-', got {name!r}")
        self.name = name
        self.config: dict[str, Any] = dict(config or {})
        self.engines: dict[str, Engine] = {}
        self.backends: dict[str, Any] = {}
        self.nodes: list[Node] = []
        self.version = 0
        self.cache = GraphCache()
        self.lint = os.environ.get("TEOLA_LINT", "") == "1"
        self._sample: Callable[[], tuple[dict[str, Any], str]] | None = None
        self._runtime: Runtime | None = None
        # OpenTelemetry recorder (teola.telemetry); None: the OTLP one when OTEL_EXPORTER_OTLP_ENDPOINT is set
        self.telemetry: Any = None

    # ---- declaration ----------------------------------------------------------------------
    def register_engine(self, engine: Engine, backend: Any = None) -> Engine:
        """Register an engine spec; `backend` optionally supplies an already-built adapter
        (anything implementing engines.protocol.EngineBackend) instead of building one from the kind."""
        if not isinstance(engine, Engine):
            raise TypeError(f"register_engine takes an Engine(...), got {engine!r}")
        if self._runtime is not None:
            raise RuntimeError(f"app {self.name!r} is running; register engines before the first query")
        self.engines[engine.name] = engine
        if backend is not None:
            self.backends[engine.name] = backend
            engine.ranks_by = backend_ranks_by(backend)
        if self.nodes:
            self.update_template(self.nodes)
        return engine

    def update_template(self, nodes: Iterable[Node]) -> None:
        """Set the workflow template. Validates it now (structure, engines, annotations, and that
        every node's inputs are produced upstream) so mistakes surface at declaration time."""
        order = validate_template(nodes, self.engines)
        compile_query(order, self.engines, -1, placeholder_query(order), {}, cache=None, lint=True)
        self.nodes = order
        self.version += 1
        self.cache.clear()

    # ---- per query ------------------------------------------------------------------------
    def placeholder_query(self) -> dict[str, Any]:
        """A small query that compiles for this app's template (teola.compile.template.placeholder_query)."""
        return placeholder_query(self.nodes)

    def set_sample(self, make: Callable[[], tuple[dict[str, Any], str]]) -> None:
        """`make()` returns (query, where its documents come from); called only when needed."""
        if not callable(make):
            raise TypeError(f"set_sample takes a function returning (query, source), got {make!r}")
        self._sample = make

    def sample(self) -> tuple[dict[str, Any], str]:
        """The app's sample query and its source (the placeholder query when none was set)."""
        if self._sample is None:
            return self.placeholder_query(), "placeholder query"
        return self._sample()

    def compile(self, query: dict[str, Any], config: dict[str, Any] | None = None) -> Compiled:
        """Compile a query into its p-graph and optimized e-graph (cached by config shape)."""
        if not self.nodes:
            raise ValueError(f"app {self.name!r} has no template; call app.update_template([...]) first")
        return compile_query(
            self.nodes, self.engines, self.version, query, self._config(config), self.cache, self.lint
        )

    def _config(self, config: dict[str, Any] | None) -> dict[str, Any]:
        if config is not None and not isinstance(config, dict):
            raise TypeError(f"config must be a dict, got {type(config).__name__}")
        return {**self.config, **(config or {})}

    async def start(self, **runtime_options: Any) -> None:
        """Start the engines (idempotent). Called by the first `run` if not called before."""
        if self._runtime is None:
            runtime = Runtime(
                self.engines, self.backends, **{**self.config.get("runtime", {}), **runtime_options}
            )
            await runtime.start()
            self._runtime = runtime
            if adopt_engine_costs(self.engines, runtime):
                self.cache.clear()

    async def run(self, query: dict[str, Any], config: dict[str, Any] | None = None) -> Result:
        """Compile and execute one query; returns a Result with `.output` and `.trace`. The engines
        start first, so the query is compiled with the costs they report."""
        await self.start()
        compiled = self.compile(query, config)
        return await self.execute(compiled, config)

    async def execute(
        self,
        compiled: Compiled,
        config: dict[str, Any] | None = None,
        on_event: Callable[[dict[str, Any]], None] | None = None,
    ) -> Result:
        """Execute a query compiled with `compile(query, config)` (pass the same config: its
        runtime keys such as timeout and priority apply here). Starts the engines if needed.
        `on_event` receives the query's progress and answer-token events (`Runtime.submit`)."""
        await self.start()
        telemetry = self.telemetry if self.telemetry is not None else telemetry_from_env()
        if telemetry is None:
            return await self._runtime.submit(compiled, self._config(config), on_event)
        start_ns = time.time_ns()
        try:
            result = await self._runtime.submit(compiled, self._config(config), on_event)
        except QueryError as exc:
            self._record(telemetry, compiled, getattr(exc, "trace", None) or [], start_ns, None, exc)
            raise
        self._record(telemetry, compiled, result.trace, start_ns, result, None)
        return result

    async def embed(
        self, texts: list[str], engine: str = "embedding", config: dict[str, Any] | None = None
    ) -> list[Any]:
        """The embedding vectors of `texts` on `engine`, in order, computed as a query of one
        EMBEDDING primitive, so its requests are batched with every other query's on that engine.
        `config`: the query's runtime keys (timeout, tenant, ...)."""
        spec = self.engines.get(engine)
        if spec is None:
            raise ValueError(f"app {self.name!r} has no engine {engine!r}; engines: {sorted(self.engines)}")
        return (await self.execute(embedding_query(spec, texts), config)).output

    def _record(
        self,
        telemetry: Any,
        compiled: Compiled,
        trace: list,
        start_ns: int,
        result: Result | None,
        error: BaseException | None,
    ) -> None:
        """Hand a finished query to the telemetry recorder; a recorder failure never fails the query."""
        try:
            telemetry.record(self.name, compiled, trace, start_ns, self.engines, result, error)
        except Exception as exc:
            log.warning(
                "app %s: recording query %s for OpenTelemetry failed: %s: %s",
                self.name,
                compiled.query_id,
                type(exc).__name__,
                exc,
            )

    def run_sync(self, query: dict[str, Any], config: dict[str, Any] | None = None) -> Any:
        """`run` for callers without an event loop (starts and stops the engines around it)."""

        async def once() -> Any:
            try:
                return await self.run(query, config)
            finally:
                await self.stop()

        return asyncio.run(once())

    async def stop(self) -> None:
        if self._runtime is not None:
            runtime, self._runtime = self._runtime, None
            await runtime.stop()

    @property
    def runtime(self) -> Runtime | None:
        return self._runtime

    def __repr__(self) -> str:
        return f"App({self.name!r}, nodes={[n.name for n in self.nodes]}, engines={list(self.engines)})"
