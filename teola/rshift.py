"""`>>` for template nodes, in one place: `a >> b` returns b; `[a, b] >> c` returns c."""
from __future__ import annotations

from typing import Any


class RShiftMixin:
    """Gives a class `>>` edges. Subclasses implement `_add_downstream(other)`."""

    def _add_downstream(self, other: Any) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def __rshift__(self, other: Any) -> Any:
        targets = other if isinstance(other, (list, tuple)) else [other]
        for t in targets:
            if not isinstance(t, RShiftMixin):
                raise TypeError(f"cannot connect {self!r} >> {t!r}: the right side must be a Node or a list of Nodes")
            self._add_downstream(t)
        return other

    def __rrshift__(self, other: Any) -> Any:
        sources = other if isinstance(other, (list, tuple)) else [other]
        for s in sources:
            if not isinstance(s, RShiftMixin):
                raise TypeError(f"cannot connect {s!r} >> {self!r}: the left side must be a Node or a list of Nodes")
            s._add_downstream(self)
        return self
