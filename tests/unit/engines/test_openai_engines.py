"""The remote-engine adapters without a server: options checked eagerly, the kind's ops and
profile per api, and connection failures retried with backoff, then reported naming the URL."""
import socket

import pytest

from engines.openai.embedding import OpenAIEmbeddingEngine
from engines.openai.http_client import RemoteEngineError
from engines.openai.llm import OpenAILLMEngine
from engines.registry import create_engine
from teola import Engine


def closed_port_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


def test_kind_openai_picks_the_adapter_by_api():
    llm = Engine("llm", kind="openai", url="http://gpu:8000", model="m")
    emb = Engine("embedding", kind="openai", api="embeddings", url="http://gpu:8000/v1")
    assert "decoding" in {o.value for o in llm.ops} and {o.value for o in emb.ops} == {"embedding"}
    assert isinstance(create_engine("llm", "openai", llm.options), OpenAILLMEngine)
    backend = create_engine("embedding", "openai", emb.options)
    assert isinstance(backend, OpenAIEmbeddingEngine) and backend.base_url == "http://gpu:8000"
    with pytest.raises(ValueError, match="api must be one of completions, embeddings"):
        Engine("x", kind="openai", api="rerank", url="http://gpu:8000")


@pytest.mark.parametrize("options, words", [
    ({}, "option url"), ({"url": "gpu:8000"}, "option url"), ({"url": "http://g", "timeout": 0}, "timeout"),
    ({"url": "http://g", "retries": -1}, "retries"), ({"url": "http://g", "max_tokens": 0}, "max_tokens"),
])
def test_bad_options_name_the_option(options, words):
    with pytest.raises(ValueError, match=words):
        OpenAILLMEngine("llm", **options)


async def test_connection_errors_are_retried_then_reported():
    url = closed_port_url()
    engine = OpenAIEmbeddingEngine("embedding", url=url, retries=2, backoff=0.01)
    with pytest.raises(RemoteEngineError, match=f"{url}/v1/embeddings failed after 3 attempts: ConnectError"):
        await engine.start()
    assert engine.client is None


async def test_not_started_engine_says_so():
    engine = OpenAILLMEngine("llm", url="http://127.0.0.1:9")
    with pytest.raises(RuntimeError, match="not started"):
        await engine.execute("decoding", [{"parts": [["user", "hi"]]}])


def test_engine_options_from_the_environment_point_a_built_in_app_at_a_server(monkeypatch):
    from teola.server.loading import resolve_app

    monkeypatch.setenv("TEOLA_ENGINE_OPTIONS", '{"llm": {"kind": "openai", "url": "http://gpu-box:8000"}}')
    app = resolve_app("naive_rag")
    assert app.engines["llm"].kind == "openai" and app.engines["llm"].options["url"] == "http://gpu-box:8000"
    assert app.engines["embedding"].kind == "sentence_transformers"
    monkeypatch.setenv("TEOLA_ENGINE_OPTIONS", '{"judge": {"kind": "openai"}}')
    with pytest.raises(ValueError, match="does not take"):
        resolve_app("naive_rag")
