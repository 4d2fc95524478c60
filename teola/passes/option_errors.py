"""Option errors in one shape: pydantic's validation errors as one message naming each problem's
path (`config.nodes.search.top_k: ...`), for component and pass options alike."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, ValidationError


def describe_errors(exc: ValidationError, prefix: str | Callable[[Any], str]) -> str:
    """A pydantic error as one clause per problem, each naming its path under `prefix` (a text, or
    a function of the problem's top-level key)."""
    lines = []
    for err in exc.errors(include_url=False):
        loc = err["loc"]
        head = prefix if isinstance(prefix, str) else prefix(loc[0] if loc else None)
        path = ".".join([head, *(str(p) for p in loc)])
        shown = repr(err.get("input"))
        shown = shown if len(shown) <= 80 else shown[:77] + "..."
        what = "unknown option" if err["type"] == "extra_forbidden" else err["msg"]
        lines.append(f"{path}: {what} (got {shown})")
    return "; ".join(lines)


def validate_options(
    model: type[BaseModel], options: dict[str, Any], prefix: str | Callable[[Any], str]
) -> None:
    """ValueError naming `prefix.<key>` for every option the model rejects."""
    try:
        model.model_validate(options)
    except ValidationError as exc:
        raise ValueError(describe_errors(exc, prefix)) from None
