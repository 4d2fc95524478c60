"""`Node`: one component of a workflow template."""

from __future__ import annotations

from typing import Any

from teola.ir.rshift import RShiftMixin

ANNOTATIONS = (None, "batchable", "splittable")


class Node(RShiftMixin):
    """A template component.

    kind: what the component does (see `teola.compile.components.component_kinds()`), e.g. "indexing",
    "query_expansion", "synthesis". engine: the registered engine name it runs on (control
    components such as "condition" and "aggregate" take none). anno: "batchable" (its work may be
    split into pipelined micro-batch stages) or "splittable" (an LLM output cut into items that go
    downstream as soon as each is decoded). config: per-component settings; a query's config may
    override them under `config["nodes"][name]`. name: unique within the app; defaults to kind.
    """

    def __init__(
        self,
        kind: str,
        engine: str | None = None,
        anno: str | None = None,
        config: dict[str, Any] | None = None,
        name: str | None = None,
    ) -> None:
        if not isinstance(kind, str) or not kind:
            raise TypeError(f"Node kind must be a non-empty string, got {kind!r}")
        if anno not in ANNOTATIONS:
            raise ValueError(f"Node {name or kind!r}: unknown anno {anno!r}; use one of {ANNOTATIONS}")
        if config is not None and not isinstance(config, dict):
            raise TypeError(f"Node {name or kind!r}: config must be a dict, got {type(config).__name__}")
        if engine is not None and not isinstance(engine, str):
            raise TypeError(f"Node {name or kind!r}: engine must be an engine name (str), got {engine!r}")
        self.kind = kind
        self.engine = engine
        self.anno = anno
        self.config: dict[str, Any] = dict(config or {})
        self.name = name or kind
        self.downstream: list[Node] = []
        self.upstream: list[Node] = []

    def _add_downstream(self, other: Node) -> None:
        if other is self:
            raise ValueError(f"Node {self.name!r} cannot depend on itself")
        if other not in self.downstream:
            self.downstream.append(other)
            other.upstream.append(self)

    def __repr__(self) -> str:
        return f"Node({self.kind!r}, name={self.name!r}, engine={self.engine!r})"
