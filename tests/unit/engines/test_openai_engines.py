"""The remote-engine adapters without a server: options checked eagerly, the kind's ops, profile
and continuity per api, one instance per URL of `urls`, and connection failures retried by the
openai client, then reported naming the URL."""

import socket

import pytest

from engines.openai.client import RemoteEngineError
from engines.openai.embedding import OpenAIEmbeddingEngine
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


def test_the_llm_api_batches_continuously_and_embeddings_do_not():
    assert Engine("llm", kind="openai", url="http://gpu:8000").continuous
    assert not Engine("embedding", kind="openai", api="embeddings", url="http://gpu:8000").continuous
    assert Engine("llm", kind="vllm").continuous and not Engine("vectordb", kind="pgvector").continuous


def test_urls_make_one_instance_per_server():
    spec = Engine("llm", kind="openai", urls=["http://a:8000", "http://b:8000/v1"], balancer="locality")
    assert spec.instances == 2 and spec.remote
    assert [spec.instance_options(i)["url"] for i in range(2)] == ["http://a:8000", "http://b:8000/v1"]
    assert "urls" not in spec.instance_options(0)
    backends = [create_engine("llm", "openai", spec.instance_options(i)) for i in range(2)]
    assert [b.base_url for b in backends] == ["http://a:8000", "http://b:8000"]
    with pytest.raises(ValueError, match="not both"):
        Engine("llm", kind="openai", url="http://a:8000", urls=["http://b:8000"])
    with pytest.raises(ValueError, match="each URL is one instance"):
        Engine("llm", kind="openai", urls=["http://a:8000", "http://b:8000"], instances=3)
    with pytest.raises(ValueError, match="non-empty list"):
        Engine("llm", kind="openai", urls=[])


def test_max_num_seqs_is_the_in_flight_cap():
    engine = OpenAILLMEngine("llm", url="http://gpu:8000", max_num_seqs=32)
    assert engine.profile.max_inflight == engine.profile.max_batch == 32
    # unreported and not given: vLLM's own GPU default, and a connection pool as large
    default = OpenAILLMEngine("llm", url="http://gpu:8000")
    assert default.profile.max_inflight == default.profile.max_batch == 256
    assert default._client_args[-1] >= default.profile.max_inflight
    wide = OpenAILLMEngine("llm", url="http://gpu:8000", max_num_seqs=512)
    assert wide._client_args[-1] == 512  # the pool follows a larger cap


@pytest.mark.parametrize(
    "options, words",
    [
        ({}, "option url"),
        ({"url": "gpu:8000"}, "option url"),
        ({"url": "http://g", "timeout": 0}, "timeout"),
        ({"url": "http://g", "retries": -1}, "retries"),
        ({"url": "http://g", "max_tokens": 0}, "max_tokens"),
    ],
)
def test_bad_options_name_the_option(options, words):
    with pytest.raises(ValueError, match=words):
        OpenAILLMEngine("llm", **options)


async def test_connection_errors_are_retried_then_reported():
    url = closed_port_url()
    engine = OpenAIEmbeddingEngine("embedding", url=url, retries=2)
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


@pytest.mark.parametrize(
    "body, overflow",
    [
        (
            {
                "message": "This model's maximum context length is 2048 tokens. "
                "However, you requested 4100 tokens",
                "type": "BadRequestError",
                "code": 400,
            },
            True,
        ),
        ({"message": "too long", "type": "invalid_request_error", "code": "context_length_exceeded"}, True),
        ({"message": "temperature must be non-negative", "type": "BadRequestError", "code": 400}, False),
    ],
)
def test_a_servers_context_overflow_is_told_apart_from_other_refusals(body, overflow):
    import httpx
    import openai

    from engines.openai.client import RemoteClient
    from engines.request_checks import ContextTooLong

    answer = httpx.Response(
        400, request=httpx.Request("POST", "http://gpu-box:8000/v1/completions"), json={"error": body}
    )
    exc = openai.BadRequestError(body["message"], response=answer, body=body)
    err = RemoteClient("llm", "http://gpu-box:8000", None, 1.0, 1.0, 0, 1).error("completions", exc)
    assert isinstance(err, RemoteEngineError) and isinstance(err, ContextTooLong) is overflow
    assert "engine 'llm': http://gpu-box:8000/v1/completions" in str(err) and body["message"] in str(err)
