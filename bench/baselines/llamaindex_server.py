"""LlamaIndex's own `OpenAILike` for the LlamaIndex baseline whose LLM is behind an OpenAI-compatible
server (`python -m bench doc_qa --remote-llm`: `vllm serve`): when the app's LLM engine is the remote
kind "openai", bench.baselines.llamaindex_rag.LlamaIndexRAG calls that server with the library's class, as a
LlamaIndex user would, instead of through teola's adapter. Each call is still logged per query
(`record`), with the server's token counts, like the in-process adapter's calls."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from llama_index.core.base.llms.types import ChatMessage, ChatResponse
from llama_index.llms.openai_like import OpenAILike
from pydantic import PrivateAttr

Record = Callable[[str, int, float, list[Any]], None]  # EngineClient.record(op, n, started, result)


class ServerLLM(OpenAILike):
    """`OpenAILike` (chat API, greedy by default) whose every call (chat, or completion through the chat
    API) is logged as one "decoding" call."""

    _record: Record | None = PrivateAttr(default=None)

    @classmethod
    def class_name(cls) -> str:
        return "teola_bench_server_llm"

    async def _achat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        started = time.perf_counter()
        response = await super()._achat(messages, **kwargs)
        if self._record is not None:
            usage = getattr(response.raw, "usage", None)
            cached = getattr(getattr(usage, "prompt_tokens_details", None), "cached_tokens", None)
            self._record(
                "decoding",
                1,
                started,
                [
                    {
                        "num_prompt_tokens": getattr(usage, "prompt_tokens", 0) or 0,
                        "num_output_tokens": getattr(usage, "completion_tokens", 0) or 0,
                        "num_cached_tokens": cached or 0,
                    }
                ],
            )
        return response


def server_llm(
    server: tuple[str, str],
    record: Record | None,
    max_tokens: int,
    context_window: int,
    temperature: float = 0.0,
) -> ServerLLM:
    """The baseline's LLM on `server` (its /v1 URL, the served model), logging through `record`."""
    url, model = server
    llm = ServerLLM(
        model=model,
        api_base=url,
        api_key="none",
        is_chat_model=True,
        context_window=context_window,
        max_tokens=max_tokens,
        temperature=temperature,
        max_retries=0,
        timeout=600.0,
    )
    llm._record = record
    return llm
