"""JSON schemas of a query's configuration, built from the options models (component kinds in
`teola.compile.components.options`, passes from their signatures): for one app (its nodes by name) and for
any app (every kind's options), as the HTTP API's OpenAPI document and config-schema endpoint show
them. Validation itself happens in the compiler, against the same models."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from teola.compile.components import component_kinds, options_model
from teola.ir.node import Node
from teola.passes import pass_names
from teola.passes.options import pass_options_model

ANY_OPTIONS: dict[str, Any] = {
    "type": "object",
    "description": "Options this kind does not declare; its decomposer checks them.",
}


def kind_schema(kind: str) -> dict[str, Any]:
    """The JSON schema of one component kind's options."""
    model = options_model(kind)
    if model is None:
        return dict(ANY_OPTIONS, title=f"{kind} options")
    schema = model.model_json_schema()
    schema["title"] = f"{kind} options"
    return schema


def nodes_schema(order: Iterable[Node] | None = None) -> dict[str, Any]:
    """`config.nodes`: for an app's nodes, each node's name with its kind's options; without nodes,
    any name with the options of some kind."""
    if order is None:
        return {
            "type": "object",
            "description": "Per-node option overrides: {node name: options of its kind}.",
            "additionalProperties": {"anyOf": [kind_schema(k) for k in component_kinds()]},
        }
    return {
        "type": "object",
        "additionalProperties": False,
        "description": "Per-node option overrides of this app.",
        "properties": {
            n.name: {**kind_schema(n.kind), "title": f"{n.name} ({n.kind}) options"} for n in order
        },
    }


def passes_schema() -> dict[str, Any]:
    """`config.passes`: each pass by name, true / false or its options."""
    props: dict[str, Any] = {}
    for name in pass_names():
        model = pass_options_model(name)
        options = model.model_json_schema() if model is not None else {"type": "object"}
        props[name] = {"anyOf": [{"type": "boolean"}, options], "title": name}
    return {
        "type": "object",
        "additionalProperties": False,
        "properties": props,
        "description": 'Turn passes on/off or give them options: {"prefill_split": false}.',
    }
