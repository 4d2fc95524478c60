"""The requests of the hostile mix (bench/studies/overheads/hostile_mix.py): the two tenants' keys, and
each hostile kind as a request (method, path, headers, body), one per finding of the review or a
malformed body."""

from __future__ import annotations

import json
import random
from typing import Any

KEYS = {"good": "good-key", "bad": "bad-key"}
BAD = {"Authorization": f"Bearer {KEYS['bad']}"}
GOOD = {"Authorization": f"Bearer {KEYS['good']}"}
JSON_TYPE = {"Content-Type": "application/json"}
DOC_60K = ("The river flows past the old mill and the town keeps its records in the hall. " * 780)[:60_000]
SMALL_DOC = "York was founded by the Romans in 71 AD as Eboracum. " * 20


def _q(
    app: str,
    query: dict[str, Any],
    config: dict[str, Any] | None = None,
    headers: dict[str, str] | None = None,
) -> tuple[str, str, dict[str, str], bytes]:
    body = {"query": query, **({"config": config} if config else {})}
    return "POST", f"/v1/apps/{app}/query", {**BAD, **JSON_TYPE, **(headers or {})}, json.dumps(body).encode()


def _door(
    body: Any, headers: dict[str, str] | None = None, raw: bytes | None = None
) -> tuple[str, str, dict, bytes]:
    content = raw if raw is not None else json.dumps(body).encode()
    return "POST", "/v1/chat/completions", {**BAD, **JSON_TYPE, **(headers or {})}, content


def _chat(**extra: Any) -> dict[str, Any]:
    return {
        "model": "naive_rag/llm",
        "messages": [{"role": "user", "content": "hi"}],
        "max_tokens": 4,
        **extra,
    }


def _nested(depth: int) -> bytes:
    return b'{"model": "naive_rag/llm", "messages": ' + b"[" * depth + b"]" * depth + b"}"


QUESTION = {"question": "Who founded York?"}
HOSTILE: dict[str, Any] = {
    # 1: overlap one token short of the chunk size on a 60 KB document
    "chunk_overlap": lambda: _q(
        "naive_rag",
        {**QUESTION, "documents": [DOC_60K]},
        {"nodes": {"indexing": {"chunk_size": 8192, "chunk_overlap": 8191}}},
    ),
    # 2: a time limit that ends before compilation does
    "compile_timeout": lambda: _q(
        "naive_rag", {**QUESTION, "documents": [SMALL_DOC * 40] * 16}, {"timeout": 0.001}
    ),
    # 3: a kept namespace filled by queries
    "namespace_growth": lambda: _q(
        "naive_rag",
        {**QUESTION, "documents": [SMALL_DOC * 20] * 64},
        {"namespace": f"x{random.randrange(4)}", "nodes": {"indexing": {"max_chunks": 100_000}}},
    ),
    # 4: a query that asks for every tool, or another tool engine
    "tools_widen": lambda: _q("tool_agent", QUESTION, {"nodes": {"tools": {"tools": []}}}),
    "tools_add": lambda: _q(
        "tool_agent", QUESTION, {"nodes": {"tools": {"tools": ["calculator", "http_get"]}}}
    ),
    # 8: a priority ahead of every other tenant
    "priority": lambda: _q("naive_rag", {**QUESTION, "documents": [SMALL_DOC]}, {"priority": -1_000_000}),
    # 10: a new metrics series per unknown app
    "unknown_app": lambda: _q(f"app{random.randrange(10**9)}", QUESTION),
    # 6, 7: no key, a wrong key, a foreign Host, the door with a cross-site content type
    "no_key": lambda: ("POST", "/v1/apps/naive_rag/query", dict(JSON_TYPE), b"x" * 1_000_000),
    "wrong_key": lambda: ("GET", "/v1/ui/queries", {"Authorization": "Bearer nope"}, b""),
    "foreign_host": lambda: ("GET", "/v1/ui/queries", {**BAD, "Host": "rebind.attacker.example"}, b""),
    "door_text_plain": lambda: _door(_chat(), {"Content-Type": "text/plain"}),
    # low findings on the door
    "door_user_not_latin1": lambda: _door(_chat(user="Zoë")),
    "door_nested": lambda: _door(None, raw=_nested(50_000)),
    "door_tool_calls_not_list": lambda: _door(
        {
            **_chat(),
            "messages": [
                {"role": "assistant", "content": None, "tool_calls": {"id": 1}},
                {"role": "user", "content": "hi"},
            ],
        }
    ),
    "door_stop_huge": lambda: _door(_chat(stop=["x" * 8] * 100_000)),
    # malformed bodies of every kind
    "not_json": lambda: ("POST", "/v1/apps/naive_rag/query", {**BAD, **JSON_TYPE}, b"{not json"),
    "not_utf8": lambda: ("POST", "/v1/apps/naive_rag/query", {**BAD, **JSON_TYPE}, b'{"query": "\xff\xfe"}'),
    "wrong_types": lambda: (
        "POST",
        "/v1/apps/naive_rag/query",
        {**BAD, **JSON_TYPE},
        json.dumps({"query": {"question": 5, "documents": "x"}}).encode(),
    ),
    "missing_query": lambda: ("POST", "/v1/apps/naive_rag/query", {**BAD, **JSON_TYPE}, b"{}"),
    "empty_body": lambda: ("POST", "/v1/apps/naive_rag/query", {**BAD, **JSON_TYPE}, b""),
    "array_body": lambda: (
        "POST",
        "/v1/apps/naive_rag/query",
        {**BAD, **JSON_TYPE},
        b"[" * 100_000 + b"]" * 100_000,
    ),
    "huge_document": lambda: _q("naive_rag", {**QUESTION, "documents": ["a" * 2_000_000]}),
}
