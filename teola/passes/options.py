"""A pass's options as a pydantic model, read from its function's signature: every keyword after
the graph is an option, typed by its annotation (bounds as `annotated_types` metadata, e.g.
`max_partials: Annotated[int, Ge(1), Le(16)] = 1`), defaulting to its default. Unannotated
options accept any value (the pass checks them)."""

from __future__ import annotations

import inspect
import typing
from functools import lru_cache
from typing import Any

from pydantic import BaseModel, ConfigDict, create_model

from teola.passes.registry import get_pass


def _options_of(fn: Any) -> list[inspect.Parameter]:
    params = list(inspect.signature(fn).parameters.values())[1:]
    return [p for p in params if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)]


def takes_any_option(fn: Any) -> bool:
    return any(p.kind is p.VAR_KEYWORD for p in inspect.signature(fn).parameters.values())


@lru_cache(maxsize=64)
def _model(fn: Any, name: str) -> type[BaseModel]:
    try:
        hints = typing.get_type_hints(fn, include_extras=True)
    except Exception:  # annotations naming what the pass's module cannot resolve: accept any value
        hints = {}
    fields: dict[str, Any] = {}
    for p in _options_of(fn):
        default = ... if p.default is p.empty else p.default
        fields[p.name] = (hints.get(p.name, Any), default)
    return create_model(
        f"{''.join(w.title() for w in name.split('_'))}Options",
        __config__=ConfigDict(extra="forbid", strict=True),
        **fields,
    )


def pass_options_model(name: str) -> type[BaseModel] | None:
    """The options model of the named pass (None when it takes **options: anything goes)."""
    fn = get_pass(name)
    return None if takes_any_option(fn) else _model(fn, name)


def option_names(name: str) -> list[str]:
    return [p.name for p in _options_of(get_pass(name))]
