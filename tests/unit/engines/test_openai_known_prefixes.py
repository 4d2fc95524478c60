"""The remote LLM engine answers a partial prefill at once ("skipped", no request) when the server
would cache nothing of it (under one KV block) or this engine sent that prefix before, as the
in-process adapter does (engines/llm_text/prefix_memo.py); a full prefill and every other request are
sent. The server is a fake client recording each body; the tokenizer a fake renderer."""

from __future__ import annotations

from typing import Any

import pytest

from engines.llm_text.prefix_memo import SENT_BEFORE, TOO_SHORT, PrefixMemo
from engines.openai.capabilities import Capabilities
from engines.openai.llm import OpenAILLMEngine


class FakeServer:
    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []

    async def complete(self, body: dict[str, Any]) -> dict[str, Any]:
        self.bodies.append(body)
        return {"usage": {"prompt_tokens": len(body["prompt"])}}


class FakeRenderer:
    def request_ids(self, req: dict[str, Any]) -> list[int]:
        return [int(t) for t in req["parts"][0][1].split()]

    def continuation_ids(self, texts: list[str]) -> list[int]:
        return []


def engine(**options: Any) -> tuple[OpenAILLMEngine, FakeServer]:
    eng = OpenAILLMEngine("llm", url="http://gpu-box:8000", **options)
    server = FakeServer()
    eng.client = server  # type: ignore[assignment]
    eng.renderer = FakeRenderer()  # type: ignore[assignment]
    eng.caps = Capabilities(vllm_fields=True, block_size=16)
    eng.prefixes = PrefixMemo(eng.caps.block_size) if eng.skip_known_prefixes else None
    return eng, server


def prompt(n: int, salt: str | None = None) -> list[dict[str, Any]]:
    return [
        {
            "parts": [["user", " ".join(str(t) for t in range(n))]],
            "complete": False,
            **({"cache_salt": salt} if salt else {}),
        }
    ]


async def test_known_and_short_prefixes_are_answered_without_a_request():
    eng, server = engine()
    (short,) = await eng.execute("partial_prefilling", prompt(10))
    (first,) = await eng.execute("partial_prefilling", prompt(40))
    (again,) = await eng.execute("partial_prefilling", prompt(40))
    (other_tenant,) = await eng.execute("partial_prefilling", prompt(40, salt="b"))
    assert short["skipped"] == TOO_SHORT and again["skipped"] == SENT_BEFORE
    assert "skipped" not in first and "skipped" not in other_tenant
    assert [len(b["prompt"]) for b in server.bodies] == [40, 40]
    assert again["num_prompt_tokens"] == 40
    await eng.execute("prefilling", [{"parts": [["user", "1 2 3"]]}])
    assert len(server.bodies) == 3  # a full prefill is always sent


async def test_the_option_off_sends_every_partial_prefill():
    eng, server = engine(skip_known_prefixes=False)
    for n in (10, 40, 40):
        await eng.execute("partial_prefilling", prompt(n))
    assert [len(b["prompt"]) for b in server.bodies] == [10, 40, 40]
    with pytest.raises(ValueError, match="skip_known_prefixes must be a bool"):
        OpenAILLMEngine("llm", url="http://gpu-box:8000", skip_known_prefixes="yes")  # type: ignore[arg-type]
