"""`POST /v1/embeddings` on the OpenAI door, on a simulated embedding engine: the official SDK (base64,
its default) and plain floats get the engine's vectors in order with usage; concurrent requests are
batched together by the engine's scheduler (each is a query of one embedding primitive); LangChain's
OpenAIEmbeddings works through it; bad requests are a 400 naming the field."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx
import openai
import pytest
from langchain_openai import OpenAIEmbeddings

from engines.sim.sim_engine import SimEngine, embed
from teola import App, Engine, Node
from teola.server import ServerSettings, create_server
from tests.support.borrowed import Borrowed


@asynccontextmanager
async def serve() -> AsyncIterator[tuple[httpx.AsyncClient, Borrowed]]:
    app = App("rag")
    llm = Borrowed(SimEngine("llm"))
    emb = Borrowed(SimEngine("embedding", latency={1: 0.05, 8: 0.05}))
    app.register_engine(Engine("llm", kind="vllm"), backend=llm)
    app.register_engine(Engine("embedding", kind="sentence_transformers"), backend=emb)
    app.update_template(
        [
            Node(
                "llm",
                name="answer",
                engine="llm",
                config={"parts": [["question", "$query.question"]], "max_tokens": 8},
            )
        ]
    )
    server = create_server({"rag": app}, ServerSettings())
    async with server.router.lifespan_context(server):
        transport = httpx.ASGITransport(app=server)
        async with httpx.AsyncClient(transport=transport, base_url="http://teola.test", timeout=30) as http:
            yield http, emb


def client(http) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(
        base_url="http://teola.test/v1", api_key="none", http_client=http, max_retries=0
    )


async def test_the_sdk_gets_the_engines_vectors_in_order_with_usage():
    async with serve() as (http, emb):
        texts = ["The Eiffel Tower is in Paris.", "Bananas are yellow."]
        answer = await client(http).embeddings.create(model="rag/embedding", input=texts)  # base64 by default
        assert [d.index for d in answer.data] == [0, 1]
        for d, text in zip(answer.data, texts):
            assert d.embedding == pytest.approx(embed(text), abs=1e-6)
        assert answer.usage.prompt_tokens == answer.usage.total_tokens > 0
        assert [r["text"] for r in emb.requests] == texts
        plain = await http.post(
            "/v1/embeddings",
            json={"model": "rag", "input": "Bananas are yellow.", "encoding_format": "float"},
        )
        assert plain.json()["data"][0]["embedding"] == pytest.approx(embed("Bananas are yellow."))
        assert plain.json()["model"] == "rag" and plain.json()["object"] == "list"
        models = [m.id for m in (await client(http).models.list()).data]
        assert models == ["rag/llm", "rag/embedding"]


async def test_concurrent_requests_share_engine_batches():
    async with serve() as (http, emb):
        sdk = client(http)
        answers = await asyncio.gather(
            *(sdk.embeddings.create(model="rag", input=[f"text {i}", f"more {i}"]) for i in range(6))
        )
        assert all(len(a.data) == 2 for a in answers)
        assert max(b["size"] for b in emb.engine.batches) > 2, "requests of several queries batched together"


async def test_langchain_openai_embeddings():
    async with serve() as (http, _):
        model = OpenAIEmbeddings(
            model="rag/embedding",
            base_url="http://teola.test/v1",
            api_key="none",
            http_async_client=http,
            check_embedding_ctx_length=False,
            max_retries=0,
        )
        vectors = await model.aembed_documents(["a cat", "a dog"])
        assert vectors[1] == pytest.approx(embed("a dog"), abs=1e-6)
        assert await model.aembed_query("a cat") == pytest.approx(vectors[0])


@pytest.mark.parametrize(
    "body, status, param",
    [
        ({"model": "rag/llm", "input": "x"}, 404, "model"),
        ({"model": "nope", "input": "x"}, 404, "model"),
        ({"model": "rag", "input": [1, 2, 3]}, 400, "input"),
        ({"model": "rag", "input": []}, 400, "input"),
        ({"model": "rag", "input": ["ok", ""]}, 400, "input"),
        ({"model": "rag", "input": "x", "encoding_format": "int8"}, 400, "encoding_format"),
        ({"model": "rag", "input": "x", "dimensions": 8}, 400, "dimensions"),
        ({"model": "rag", "input": "x", "truncate": True}, 400, "truncate"),
    ],
)
async def test_bad_requests_name_the_field(body, status, param):
    async with serve() as (http, _):
        r = await http.post("/v1/embeddings", json=body)
        assert r.status_code == status and r.json()["error"]["param"] == param, r.text
