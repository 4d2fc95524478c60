"""The segments of an LLM call that pauses for tools (the "agent" component): the request fields each
segment adds (its KV key, the API it may stop at, the continuation text), the handling of its pause
the graph tier hands in, the tool request a segment's text ends with, and what the model reads back
after it. Pure functions over the primitive's args and the query's object store, like
teola.runtime.requests."""

from __future__ import annotations

from typing import Any

from teola.compile.tool_syntax import continuation_text, parse_tool_call


def segment_fields(args: dict[str, Any], values: dict[str, Any]) -> dict[str, Any]:
    """The request fields of one segment of a pausing call (none for any other LLM call):
    "kv_key" (the query and the node: every segment of the call shares it), "api" on a segment that
    may stop at a tool call (its handling of the pause is a hint of its dispatch record:
    `pause_hint`), and "continuation": the text the first segment's turn begins with ("start"),
    then everything the call has written and its tools returned so far on every segment after the first."""
    node = args.get("kv_node")
    if node is None:
        return {}
    out: dict[str, Any] = {"kv_key": f"{values.get('sys.query', values.get('sys.namespace'))}/{node}"}
    if args.get("pause_kv"):
        out["api"] = args.get("api")
    if args.get("start"):  # the first segment's turn begins with this text (its decode value holds it)
        out["continuation"] = [args["start"]]
    if args.get("continuation"):
        text_keys, result_keys = args["continuation"]
        allowed = args.get("tools") or []
        texts = [str(values.get(k) or "") for k in text_keys]
        results = [tool_result(values.get(k), text, allowed) for k, text in zip(result_keys, texts)]
        out["continuation"] = [continuation_text(texts, results)]
    return out


def pause_hint(args: dict[str, Any]) -> str | None:
    """The handling of the pause a segment of a pausing call may stop at ("preserve", "discard",
    "swap" or "auto"), which the graph tier hands in with its request; None for any other call."""
    return (args.get("pause_kv") or None) if args.get("kv_node") is not None else None


def tool_requests(args: dict[str, Any], text: Any) -> list[dict[str, Any]]:
    """The tool request a segment's text ends with: none when it wrote no parsable call of an allowed
    tool (the continuation then tells the model why: `tool_result`). A failing tool comes back as an
    "error: ..." result (the tool engine's "on_error": "result") instead of failing the query."""
    call = parse_tool_call(text if isinstance(text, str) else "")
    allowed = args.get("allowed") or []
    if call is None or call.error is not None or call.name not in allowed:
        return []
    return [{"tool": call.name, "args": call.arguments, "on_error": "result"}]


def tool_result(value: Any, text: str, allowed: list[str]) -> Any:
    """What the model reads back after the tool call in `text`: the tool's result, or why there is none."""
    if isinstance(value, list) and value:
        return value[0]
    call = parse_tool_call(text)
    if call is None:
        return "error: no tool call"
    if call.error is not None:
        return f"error: {call.error}"
    return f"error: unknown tool {call.name!r}; tools: {', '.join(allowed) or 'none'}"
