"""Compilation of one query: p-graph (decomposition) -> e-graph (passes), with a cache of
optimized graphs keyed by template version and config shape."""

from __future__ import annotations

import json
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from engines.requests import QUERY_PREFIX, STAGING_PREFIX, is_temporary, query_namespace
from teola.compile.components.packing import TEXT_SLACK
from teola.compile.decompose import build_pgraph, check_node_options, prepare_inputs
from teola.ir.engine_spec import Engine
from teola.ir.graph import Graph
from teola.ir.node import Node
from teola.passes import run_pipeline

# Config keys that change the graph; the rest (policy, timeouts, priority) only steer the runtime.
GRAPH_KEYS = ("nodes", "passes")


@dataclass(slots=True)
class Compiled:
    """A compiled query. `inputs` are the values the query starts with (its fields, chunks, its
    namespace); `pgraph` and `egraph` are shared with the cache: treat them as read-only."""

    pgraph: Graph
    egraph: Graph
    inputs: dict[str, Any]
    cache_hit: bool
    passes_applied: list[str]
    seconds: float
    prepare_seconds: float = 0.0  # of `seconds`: chunking and other per-query data preparation
    query_id: str = field(default_factory=lambda: uuid.uuid4().hex)


@dataclass(slots=True)
class CacheStats:
    hits: int = 0
    misses: int = 0


class GraphCache:
    """Optimized graphs by (template version, config shape, data shape), LRU-bounded."""

    def __init__(self, capacity: int = 256) -> None:
        self.capacity = capacity
        self.stats = CacheStats()
        self._items: dict[tuple, tuple[Graph, Graph, list[str]]] = {}
        self._lock = threading.Lock()  # the server compiles in worker threads

    def get(self, key: tuple) -> tuple[Graph, Graph, list[str]] | None:
        with self._lock:
            item = self._items.pop(key, None)
            if item is None:
                self.stats.misses += 1
                return None
            self._items[key] = item
            self.stats.hits += 1
            return item

    def put(self, key: tuple, item: tuple[Graph, Graph, list[str]]) -> None:
        with self._lock:
            self._items[key] = item
            while len(self._items) > self.capacity:
                self._items.pop(next(iter(self._items)))

    def clear(self) -> None:
        with self._lock:
            self._items.clear()


def shape_key(version: int, config: dict[str, Any], inputs: dict[str, Any]) -> tuple:
    """What the graph depends on: the template version, the graph-shaping config, the sizes of
    list-valued inputs (documents -> chunk count), the length class of text inputs (synthesis
    packs chunks around the question: `TEXT_BUCKET` characters a class) and whether the namespace is
    the query's own, never the text itself."""
    cfg = json.dumps({k: config.get(k) for k in GRAPH_KEYS}, sort_keys=True, default=str)
    data = tuple(sorted((k, _size(v)) for k, v in inputs.items() if k != "sys.namespace"))
    # a kept namespace may hold other queries' chunks, so searches over it are never pruned
    return (version, cfg, data, config.get("namespace") is None)


# a class's texts differ by fewer characters (so tokens) than synthesis packing leaves room for
TEXT_BUCKET = TEXT_SLACK


def _size(v: Any) -> int:
    if isinstance(v, (list, tuple)):
        return len(v)
    if isinstance(v, str):
        return -2 - len(v) // TEXT_BUCKET
    return -1


def compile_query(
    order: list[Node],
    engines: dict[str, Engine],
    version: int,
    query: dict[str, Any],
    config: dict[str, Any],
    cache: GraphCache | None,
    lint: bool = False,
) -> Compiled:
    t0 = time.perf_counter()
    if not isinstance(config, dict):
        raise TypeError(f"config must be a dict, got {type(config).__name__}")
    nodes_cfg = config.get("nodes") or {}
    if not isinstance(nodes_cfg, dict):
        raise TypeError("config['nodes'] must be a dict of node name -> config overrides")
    unknown = sorted(set(nodes_cfg) - {n.name for n in order})
    if unknown:
        raise ValueError(f"config['nodes'] names unknown node(s) {unknown}; nodes: {[n.name for n in order]}")
    check_node_options(order, config)
    inputs = prepare_inputs(order, query, config, engines)
    namespace = config.get("namespace") or query_namespace(uuid.uuid4().hex)
    if not isinstance(namespace, str):
        raise TypeError("config['namespace'] must be a string")
    if config.get("namespace") and is_temporary(namespace):
        raise ValueError(
            f"config['namespace']={namespace!r}: names starting with {STAGING_PREFIX!r} or "
            f"{QUERY_PREFIX!r} are the runtime's staging namespaces and per-query namespaces; "
            "choose another name"
        )
    inputs["sys.namespace"] = namespace
    t_prepared = time.perf_counter()
    key = shape_key(version, config, inputs)
    hit = cache.get(key) if cache is not None else None
    if hit is None:
        pgraph = build_pgraph(order, engines, query, config, dict(inputs))
        if lint:
            pgraph.lint()
        egraph, applied = run_pipeline(pgraph, config.get("passes"), lint=lint)
        egraph.assign_depths()
        pgraph.assign_depths()
        if lint:
            egraph.lint()
        if cache is not None:
            cache.put(key, (pgraph, egraph, applied))
    else:
        pgraph, egraph, applied = hit
    return Compiled(
        pgraph, egraph, inputs, hit is not None, applied, time.perf_counter() - t0, t_prepared - t0
    )
