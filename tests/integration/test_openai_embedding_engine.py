"""Remote embeddings (engine kind "openai", api "embeddings") against a small OpenAI-shaped
embeddings server started here on a loopback port, computing real MiniLM embeddings with
sentence-transformers: a batch is one HTTP request and the vectors match the in-process engine."""

import asyncio
import socket

import numpy as np
import pytest

from engines.registry import create_engine
from teola import Engine
from tests.support.waiting import until

pytestmark = pytest.mark.engines

TEXTS = ["The Eiffel Tower is in Paris.", "Gustave Eiffel was an engineer.", "Bananas are yellow."]


def embeddings_server(model):
    """An app serving `POST /v1/embeddings` (the OpenAI request and response shapes) with `model`."""
    from fastapi import FastAPI

    app = FastAPI()
    app.state.requests = []

    @app.post("/v1/embeddings")
    async def embeddings(body: dict) -> dict:
        texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
        app.state.requests.append(len(texts))
        vectors = await asyncio.to_thread(model.encode, texts)  # not normalized: the client does it
        return {
            "object": "list",
            "model": body["model"],
            "data": [
                {"object": "embedding", "index": i, "embedding": v.tolist()} for i, v in enumerate(vectors)
            ],
            "usage": {"prompt_tokens": 0, "total_tokens": 0},
        }

    return app


async def test_remote_embeddings_batch_and_match_in_process(embedding_engine):
    import uvicorn
    from sentence_transformers import SentenceTransformer

    from engines.assets.models import resolve_model

    model = SentenceTransformer(str(resolve_model("all-minilm-l6-v2", prepare=True)), device="cpu")
    app = embeddings_server(model)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    serving = asyncio.ensure_future(server.serve(sockets=[sock]))
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    spec = Engine("embedding", kind="openai", api="embeddings", url=url, model="minilm")
    assert spec.ops == {op for op in spec.ops if op.value == "embedding"} and spec.max_efficient_batch == 32
    remote = create_engine("embedding", "openai", spec.options)
    try:
        await until(lambda: server.started)
        await remote.start()
        got = await remote.execute("embedding", [{"text": t} for t in TEXTS])
        want = await embedding_engine.execute("embedding", [{"text": t} for t in TEXTS])
        assert app.state.requests[-1] == len(TEXTS)  # the batch went as one request
        for g, w in zip(got, want):
            assert abs(np.linalg.norm(g) - 1) < 1e-5
            assert float(np.dot(g, w)) > 0.999
    finally:
        await remote.stop()
        server.should_exit = True
        await serving
        sock.close()
