"""What a component decomposer sees while it builds its sub-graph (Teola Algorithm 1, line 4)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from teola.ir.graph import Graph
from teola.ir.node import Node
from teola.ir.primitive import Primitive


@dataclass(frozen=True, slots=True)
class Port:
    """A value a component offers downstream: its object-store key and, for lists, the item
    count known at compile time (an upper bound for LLM-produced lists); n=0 for a scalar.
    `item_tokens`: a bound on any item's tokens (chunk tokens: the embedding model's, or words and
    punctuation marks, `teola.compile.chunk_tokenizer`), known from configuration (the indexing node's
    chunk_size) so it holds for any documents; 0 = unknown."""

    key: str
    n: int = 0
    item_tokens: int = 0


@dataclass(slots=True)
class SubGraph:
    prims: list[Primitive] = field(default_factory=list)
    exports: dict[str, Port] = field(default_factory=dict)


@dataclass(slots=True)
class BuildContext:
    graph: Graph
    node: Node
    config: dict[str, Any]
    query: dict[str, Any]
    initial: dict[str, Any]
    ancestors: list[tuple[Node, dict[str, Port]]]  # nearest first
    engine_kinds: dict[str, str]
    own_namespace: bool = True  # the query's namespace is made for it (no config "namespace")
    sub: SubGraph = field(default_factory=SubGraph)

    def key(self, name: str) -> str:
        return f"{self.node.name}.{name}"

    def add(self, prim: Primitive) -> Primitive:
        """Add a primitive of this component and draw data edges from the writers of its inputs."""
        self.graph.add(prim)
        writers = self.graph.producers()
        for k in prim.inputs:
            if k in writers:
                self.graph.connect(writers[k], prim)
        self.sub.prims.append(prim)
        return prim

    def find(self, *ports: str) -> Port:
        """The nearest upstream component's port among `ports` (first name preferred)."""
        for _, exports in self.ancestors:
            for p in ports:
                if p in exports:
                    return exports[p]
        raise ValueError(
            f"node {self.node.name!r} ({self.node.kind}) needs a "
            f"{' or '.join(repr(p) for p in ports)} input, "
            "but no upstream node produces one; connect such a node before it with >>"
        )

    def find_optional(self, *ports: str) -> Port | None:
        try:
            return self.find(*ports)
        except ValueError:
            return None

    def question(self) -> str:
        """The key of the query's question (required by most components)."""
        if "question" not in self.query:
            raise ValueError(
                f"node {self.node.name!r} ({self.node.kind}) needs query['question']; "
                "send {'question': '...'} in the query"
            )
        return "query.question"

    def engine(self, default_kind: str | None = None) -> str:
        """The node's engine name, checked to be registered."""
        name = self.node.engine
        if name is None:
            raise ValueError(
                f"node {self.node.name!r} ({self.node.kind}) needs engine=...; "
                f"registered engines: {sorted(self.engine_kinds)}"
            )
        return name

    def int_config(self, name: str, default: int, minimum: int = 1, maximum: int = 10_000) -> int:
        """An int option in [minimum, maximum]; ValueError naming config.nodes.<node>.<name> otherwise
        (the upper bounds keep one query's graph small enough to compile in well under a second)."""
        v = self.config.get(name, default)
        if not isinstance(v, int) or isinstance(v, bool) or not minimum <= v <= maximum:
            raise ValueError(
                f"config.nodes.{self.node.name}.{name}: must be an int in [{minimum}, {maximum}], got {v!r}"
            )
        return v
