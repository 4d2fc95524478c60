"""How the remote LLM engine (engines.openai.llm) reads one decode's answer: as one JSON answer (when
nobody reads the decode while it runs) or as a stream of chunks, into its `Decoded` and `ended`, the
facts that come with the end ("usage", "finish_reason", and "logprobs", a list extended as they come).
Cancelling either closes the connection: vLLM aborts the request."""

from __future__ import annotations

import contextlib
from typing import Any

from engines.llm_text.batch_stream import Decoded
from engines.openai.client import RemoteClient
from engines.openai.wire import completion_logprobs


async def read_whole(
    client: RemoteClient, body: dict[str, Any], out: Decoded, ended: dict[str, Any], special: frozenset[str]
) -> None:
    """The decode as one answer; `special`: the tokens its logprobs leave out (the end of turn)."""
    body = {k: v for k, v in body.items() if k not in ("stream", "stream_options")}
    answer = await client.complete(body)
    ended["usage"] = usage = answer.get("usage")
    for choice in answer.get("choices") or ():
        ended["finish_reason"] = choice.get("finish_reason")
        if choice.get("logprobs") is not None:
            ended["logprobs"].extend(
                completion_logprobs(choice["logprobs"], body.get("logprobs") or 0, special)
            )
        ids = choice.get("token_ids") or []
        tokens = len(ids) or int((usage or {}).get("completion_tokens") or 0)
        await out.feed(choice.get("text") or "", ids, tokens)


async def read_stream(
    client: RemoteClient, body: dict[str, Any], out: Decoded, ended: dict[str, Any], special: frozenset[str]
) -> None:
    """The decode as a stream of chunks, until it ends or every item asked for is out."""
    # leaving closes the connection: vLLM aborts the request
    async with contextlib.aclosing(client.stream(body)) as chunks:
        async for chunk in chunks:
            if chunk.get("usage") is not None:
                ended["usage"] = chunk["usage"]
            for choice in chunk.get("choices") or ():
                if choice.get("finish_reason"):
                    ended["finish_reason"] = choice["finish_reason"]
                if choice.get("logprobs") is not None:
                    ended["logprobs"].extend(
                        completion_logprobs(choice["logprobs"], body.get("logprobs") or 0, special)
                    )
                ids = choice.get("token_ids") or []
                text = choice.get("text") or ""
                # without token ids, a streamed chunk with text carries one token (vLLM, OpenAI)
                if await out.feed(text, ids, len(ids) or int(bool(text))):
                    return  # every item asked for is out: closing the stream stops the decode
