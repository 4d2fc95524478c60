"""What a pass returns."""

from __future__ import annotations

from dataclasses import dataclass

from teola.ir.graph import Graph


@dataclass(frozen=True, slots=True)
class PassResult:
    graph: Graph
    modified: bool
