"""What a query may change in a node its app declares: a query's `config.nodes.<node>` narrows what
the app allows, never widens it. The app author's own `Node(config=...)` is the ceiling:

- `tools`: the app's list is every tool the node may call (none when the app lists none); a query
  may pick a subset of it (an empty list: no tools), never a tool the app did not list.
- options that decide what runs with the app's authority (an agent's `tool_engine`, and the
  instruction, examples and prompt parts its model reads before the question) are the app's
  alone: a query that sets one to another value than the app's is refused.

A query is a tenant's request and the tools are the operator's (an HTTP tool carries its auth
headers), so these are enforced when the query compiles, naming the option and the fix.
"""

from __future__ import annotations

import json
from typing import Any

from teola.compile.components.context import BuildContext


def app_tools(ctx: BuildContext) -> list[str]:
    """The tools the app's own node config lists (none when it lists none)."""
    tools = ctx.node.config.get("tools")
    return [t for t in tools if isinstance(t, str)] if isinstance(tools, (list, tuple)) else []


def narrowed_tools(ctx: BuildContext) -> list[str]:
    """The node's tools after the query's override: a subset of `app_tools`, else ValueError naming
    config.nodes.<node>.tools."""
    ceiling = app_tools(ctx)
    tools = ctx.config.get("tools", ceiling)
    if not isinstance(tools, (list, tuple)):
        raise ValueError(f"config.nodes.{ctx.node.name}.tools: must be a list of tool names, got {tools!r}")
    extra = [t for t in tools if t not in ceiling]
    if extra:
        raise ValueError(
            f"config.nodes.{ctx.node.name}.tools: {extra} not among the tools the app allows node "
            f"{ctx.node.name!r} ({', '.join(ceiling) or 'none'}); a query may only pick a subset of them"
        )
    return list(tools)


def app_only(ctx: BuildContext, *keys: str) -> None:
    """ValueError naming config.nodes.<node>.<key> when a query set one of `keys` to anything but the
    app's own value (a query may repeat the app's value, never change it)."""
    for key in keys:
        if _plain(ctx.config.get(key)) != _plain(ctx.node.config.get(key)):
            raise ValueError(
                f"config.nodes.{ctx.node.name}.{key}: set by the app only; a query cannot change it "
                f"(leave it out; a query may narrow 'tools' to a subset of the app's)"
            )


def _plain(value: Any) -> Any:
    """A config value as JSON data, so an app's tuples equal a query's lists."""
    return json.loads(json.dumps(value, default=str))
