"""Queries of one primitive: work a caller asks of one engine directly (the OpenAI door's
`/v1/embeddings`), compiled into a one-primitive graph so it runs through the runtime like any
query: the graph scheduler dispatches it and the engine's scheduler batches its requests with
every other query's (its policy, its batch limits)."""

from __future__ import annotations

import functools
import time

from teola.compile.compiler import Compiled
from teola.ir.engine_spec import Engine
from teola.ir.graph import EngineInfo, Graph
from teola.ir.ops import PrimOp
from teola.ir.primitive import Primitive

TEXTS = "input.texts"
EMBEDDINGS = "embeddings"


def embedding_query(engine: Engine, texts: list[str]) -> Compiled:
    """A query embedding `texts` on `engine` (one request per text); its output is the vectors,
    in order."""
    if not isinstance(texts, list) or not texts or not all(isinstance(t, str) for t in texts):
        raise ValueError(f"texts must be a non-empty list of strings, got {texts!r:.80}")
    if PrimOp.EMBEDDING not in engine.ops:
        raise ValueError(f"engine {engine.name!r} ({engine.kind}) does not run embedding")
    start = time.perf_counter()
    graph = _embedding_graph(engine.name, engine.info())
    return Compiled(
        pgraph=graph,
        egraph=graph,
        inputs={TEXTS: list(texts)},
        cache_hit=True,
        passes_applied=[],
        seconds=time.perf_counter() - start,
    )


@functools.lru_cache(maxsize=64)
def _embedding_graph(name: str, info: EngineInfo) -> Graph:
    """The one-primitive graph (shared and read-only, like a cached compiled graph)."""
    graph = Graph(inputs=frozenset({TEXTS}), engines={name: info}, components=("embed",))
    graph.add(
        Primitive(
            PrimOp.EMBEDDING, name, "embed", inputs=(TEXTS,), outputs=(EMBEDDINGS,), args={"map": [TEXTS]}
        )
    )
    graph.outputs = (EMBEDDINGS,)
    graph.assign_depths()
    graph.lint()
    return graph
