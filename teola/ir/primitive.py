"""The primitive: one node of a p-graph or e-graph."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from teola.ir.ops import PrimOp


@dataclass(slots=True)
class Primitive:
    """One task primitive (Teola Table 1).

    inputs / outputs: object-store keys read and written. args: op-specific static arguments
    (prompt parts, top_k, the keys a batchable primitive maps over, ...). num_requests: how many
    engine requests it issues (its batch size). depth: distance to the graph's output (0 = output).
    Parents and children live in the owning `Graph` (`graph.parents(p.id)`).
    """

    op: PrimOp
    engine: str | None
    component: str
    inputs: tuple[str, ...] = ()
    outputs: tuple[str, ...] = ()
    args: dict[str, Any] = field(default_factory=dict)
    num_requests: int = 1
    label: str = ""
    id: int = -1
    depth: int = 0

    @property
    def name(self) -> str:
        return f"{self.component}.{self.label}" if self.label else self.component

    def clone(self, **changes: Any) -> Primitive:
        """A copy with fresh args (shallow-copied) and the given fields replaced; id unset."""
        fields = {f: getattr(self, f) for f in self.__slots__ if f not in ("id",)}
        fields["args"] = dict(self.args)
        fields.update(changes)
        return Primitive(**fields)
