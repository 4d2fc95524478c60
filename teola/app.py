"""`App`: a template of components plus the engines they run on; compiles and runs queries."""
from __future__ import annotations

import asyncio
import os
from typing import Any, Iterable

from teola.compiler import Compiled, GraphCache, compile_query
from teola.engine_spec import Engine
from teola.node import Node
from teola.template import validate_template

SAMPLE_QUERY = {"question": "What is this about?", "documents": ["A short sample document."]}


class App:
    """An LLM application served by teola.

    >>> app = App("qa")
    >>> app.register_engine(Engine("llm", kind="vllm", model="smollm2-135m-instruct"))
    >>> app.update_template([Node("llm", engine="llm")])
    >>> compiled = app.compile({"question": "Hi?"})
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
        self._runtime: Any = None

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
        if self.nodes:
            self.update_template(self.nodes)
        return engine

    def update_template(self, nodes: Iterable[Node]) -> None:
        """Set the workflow template. Validates it now (structure, engines, annotations, and that
        every node's inputs are produced upstream) so mistakes surface at declaration time."""
        order = validate_template(nodes, self.engines)
        compile_query(order, self.engines, -1, _sample_query(order), {}, cache=None, lint=True)
        self.nodes = order
        self.version += 1
        self.cache.clear()

    # ---- per query ------------------------------------------------------------------------
    def compile(self, query: dict[str, Any], config: dict[str, Any] | None = None) -> Compiled:
        """Compile a query into its p-graph and optimized e-graph (cached by config shape)."""
        if not self.nodes:
            raise ValueError(f"app {self.name!r} has no template; call app.update_template([...]) first")
        cfg = {**self.config, **(config or {})}
        return compile_query(self.nodes, self.engines, self.version, query, cfg, self.cache, self.lint)

    async def start(self, **runtime_options: Any) -> None:
        """Start the engines (idempotent). Called by the first `run` if not called before."""
        if self._runtime is None:
            from teola.runtime.runtime import Runtime
            runtime = Runtime(self.engines, self.backends, **{**self.config.get("runtime", {}), **runtime_options})
            await runtime.start()
            self._runtime = runtime

    async def run(self, query: dict[str, Any], config: dict[str, Any] | None = None) -> Any:
        """Compile and execute one query; returns a Result with `.output` and `.trace`."""
        compiled = self.compile(query, config)
        await self.start()
        return await self._runtime.run(compiled, {**self.config, **(config or {})})

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
    def runtime(self) -> Any:
        return self._runtime

    def __repr__(self) -> str:
        return f"App({self.name!r}, nodes={[n.name for n in self.nodes]}, engines={list(self.engines)})"


def _sample_query(order: list[Node]) -> dict[str, Any]:
    q = dict(SAMPLE_QUERY)
    for n in order:
        for _, src in n.config.get("parts", []) if isinstance(n.config.get("parts"), list) else []:
            if isinstance(src, str) and src.startswith("$query."):
                q.setdefault(src[len("$query."):], "sample")
    return q
