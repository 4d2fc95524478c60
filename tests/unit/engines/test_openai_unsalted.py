"""A tenant's cache_salt on a remote server that does not take vLLM's fields (security review, issue
71): sent without it (tenants then share the server's prefix cache) with one warning per engine
naming the server, or refused with the engine option unsalted="refuse". The server is a fake
client that records each request body; the tokenizer a fake renderer."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from engines.openai.capabilities import Capabilities
from engines.openai.client import RemoteEngineError
from engines.openai.llm import OpenAILLMEngine


class FakeCompletions:
    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []

    async def complete(self, body: dict[str, Any]) -> dict[str, Any]:
        self.bodies.append(body)
        return {"usage": None}


class FakeRenderer:
    def request_ids(self, req: dict[str, Any]) -> list[int]:
        return [1, 2, 3]

    def continuation_ids(self, texts: list[str]) -> list[int]:
        return []


def engine(vllm_fields: bool, **options: Any) -> tuple[OpenAILLMEngine, FakeCompletions]:
    eng = OpenAILLMEngine("llm", url="http://gpu-box:8000", **options)
    completions = FakeCompletions()
    eng.client = completions  # type: ignore[assignment]
    eng.renderer = FakeRenderer()  # type: ignore[assignment]
    eng.caps = Capabilities(vllm_fields=vllm_fields)
    return eng, completions


def prefill(salt: str | None) -> list[dict[str, Any]]:
    return [{"parts": [["user", "hi"]], **({"cache_salt": salt} if salt else {})}]


async def test_a_vllm_server_gets_the_salt():
    eng, completions = engine(vllm_fields=True)
    await eng.execute("prefilling", prefill("tenant-a"))
    assert completions.bodies[0]["cache_salt"] == "tenant-a"


async def test_another_server_warns_once_naming_it_that_tenants_share_its_prefix_cache(caplog):
    eng, completions = engine(vllm_fields=False)
    with caplog.at_level(logging.WARNING, logger="teola.engines"):
        await eng.execute("prefilling", prefill("tenant-a"))
        await eng.execute("prefilling", prefill("tenant-b"))
        await eng.execute("prefilling", prefill(None))
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert (
        len(warnings) == 1
        and "http://gpu-box:8000" in warnings[0]
        and "share its prefix cache" in warnings[0]
    )
    assert len(completions.bodies) == 3 and all("cache_salt" not in str(b) for b in completions.bodies)


async def test_refuse_fails_salted_requests_only():
    eng, completions = engine(vllm_fields=False, unsalted="refuse")
    with pytest.raises(RemoteEngineError, match="does not take vLLM's cache_salt"):
        await eng.execute("prefilling", prefill("tenant-a"))
    await eng.execute("prefilling", prefill(None))
    assert len(completions.bodies) == 1
    with pytest.raises(ValueError, match="option unsalted must be one of warn, refuse"):
        OpenAILLMEngine("llm", url="http://gpu-box:8000", unsalted="ignore")
