"""The remote client reads a completions stream as server-sent events straight from the bytes
(engines.openai.client.RemoteClient.stream): events split anywhere across reads, multi-line data,
comments and "[DONE]", an error the server sends inside the stream, and the connection closed once
the reader stops. The server is a fake response; no network."""

from __future__ import annotations

import json
from typing import Any

import pytest

from engines.openai.client import RemoteClient, RemoteEngineError

CHUNKS = [
    {"choices": [{"index": 0, "text": "Hel", "token_ids": [1]}]},
    {"choices": [{"index": 0, "text": "lo \u00e9", "token_ids": [2, 3], "finish_reason": "length"}]},
    {"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 3}},
]


class FakeResponse:
    def __init__(self, body: bytes, block: int) -> None:
        self.body, self.block, self.read, self.closed = body, block, 0, False

    async def aiter_bytes(self):
        for k in range(0, len(self.body), self.block):
            self.read = k + self.block
            yield self.body[k : k + self.block]

    async def aclose(self) -> None:
        self.closed = True


def sse(events: list[Any], crlf: bool = False) -> bytes:
    end = "\r\n" if crlf else "\n"
    text = f": keep-alive comment{end}{end}"
    text += "".join(f"data: {e if isinstance(e, str) else json.dumps(e)}{end}{end}" for e in events)
    return text.encode()


def client(response: FakeResponse) -> tuple[RemoteClient, list[dict[str, Any]]]:
    c = RemoteClient("llm", "http://gpu-box:8000", None, 10.0, 5.0, 0, 4)
    posted: list[dict[str, Any]] = []

    async def post(path: str, **kwargs: Any) -> FakeResponse:
        posted.append({"path": path, **kwargs})
        return response

    c.api.post = post  # type: ignore[method-assign]
    return c, posted


@pytest.mark.parametrize("block", [1, 7, 64, 10_000])
@pytest.mark.parametrize("crlf", [False, True])
async def test_every_event_comes_out_whole_however_the_bytes_are_cut(block, crlf):
    body = sse([*CHUNKS, "[DONE]"], crlf)
    response = FakeResponse(body, block)
    c, posted = client(response)
    got = [chunk async for chunk in c.stream({"model": "m", "prompt": [1, 2], "stream": True})]
    assert got == CHUNKS
    assert posted[0]["path"] == "/completions" and posted[0]["body"]["prompt"] == [1, 2]
    assert response.read >= len(body) and response.closed  # read to its end after [DONE], then closed


async def test_multi_line_data_is_one_event():
    payload = json.dumps(CHUNKS[0], indent=1).split("\n")
    body = ("".join(f"data: {line}\n" for line in payload) + "\n" + "data: [DONE]\n\n").encode()
    c, _ = client(FakeResponse(body, 5))
    assert [chunk async for chunk in c.stream({})] == [CHUNKS[0]]


async def test_an_error_inside_the_stream_raises_with_the_servers_message():
    body = sse([CHUNKS[0], {"error": {"message": "engine dead", "code": 500}}, "[DONE]"])
    response = FakeResponse(body, 16)
    c, _ = client(response)
    got = []
    with pytest.raises(RemoteEngineError, match="engine dead"):
        async for chunk in c.stream({}):
            got.append(chunk)
    assert got == [CHUNKS[0]] and response.closed


async def test_closing_the_reader_early_closes_the_connection():
    response = FakeResponse(sse([*CHUNKS, "[DONE]"]), 8)
    c, _ = client(response)
    chunks = c.stream({})
    assert await chunks.__anext__() == CHUNKS[0]
    await chunks.aclose()
    assert response.closed and response.read < len(response.body)


async def test_a_whole_answer_is_its_json():
    answer = {"choices": [{"text": "hi", "finish_reason": "stop"}], "usage": {"prompt_tokens": 2}}

    class Whole:
        content = json.dumps(answer).encode()

    c = RemoteClient("llm", "http://gpu-box:8000", None, 10.0, 5.0, 0, 4)

    async def post(path: str, **kwargs: Any) -> Whole:
        assert path == "/completions" and "stream" not in kwargs
        return Whole()

    c.api.post = post  # type: ignore[method-assign]
    assert await c.complete({"model": "m"}) == answer
