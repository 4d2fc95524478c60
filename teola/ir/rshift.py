"""`>>` for template nodes, in one place: `a >> b` returns b; `[a, b] >> c` returns c."""

from __future__ import annotations

from typing import Any


class RShiftMixin:
    """Gives a class `>>` edges. Subclasses implement `_add_downstream(other)`."""

    def _add_downstream(self, other: Any) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def __rshift__(self, other: Any) -> Any:
        for t in _nodes(other, lambda t: f"cannot connect {self!r} >> {t!r}: the right side"):
            self._add_downstream(t)
        return other

    def __rrshift__(self, other: Any) -> Any:
        for s in _nodes(other, lambda s: f"cannot connect {s!r} >> {self!r}: the left side"):
            s._add_downstream(self)
        return self


def _nodes(side: Any, where: Any) -> list[RShiftMixin]:
    """One side of `>>` as a list of nodes; TypeError (`where(item)` + the rule) for anything else."""
    items = list(side) if isinstance(side, (list, tuple)) else [side]
    for item in items:
        if not isinstance(item, RShiftMixin):
            raise TypeError(f"{where(item)} must be a Node or a list of Nodes")
    return items
