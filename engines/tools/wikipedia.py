"""The `wikipedia` tool: a lookup over the local Wikipedia corpus table (engines.search.text_search),
added by the tool engine's option `wikipedia=`. Its arguments come from a model, so `top_k` is
bounded: one call returns at most `MAX_TOP_K` lead paragraphs."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

MAX_TOP_K = 10


def wikipedia_tool(search: Any) -> Callable[..., Awaitable[list[dict[str, str]]]]:
    """The tool over a started search engine (anything with `execute("searching", requests)`)."""

    async def wikipedia(query: str, top_k: int = 3) -> list[dict[str, str]]:
        """Look up Wikipedia lead paragraphs (local corpus): args query, top_k (default 3, at most 10)."""
        if not isinstance(query, str) or not query.strip():
            raise ValueError("query must be a non-empty string")
        if isinstance(top_k, bool) or not isinstance(top_k, int) or not 1 <= top_k <= MAX_TOP_K:
            raise ValueError(f"top_k={top_k!r}: must be an int from 1 to {MAX_TOP_K}")
        [hits] = await search.execute("searching", [{"query": query, "top_k": top_k}])
        return [{"title": h["title"], "text": h["text"]} for h in hits]

    return wikipedia
