"""HTTP server tests on deterministic in-process engines (engines/sim/sim_engine.py): every endpoint,
the 4xx answers naming the problem, engine failures and timeouts that leave the server serving, 50
concurrent queries counted in /metrics, and the API key."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest

from apps.advanced_rag import build as build_advanced_rag
from engines.sim.sim_engine import SimEngine
from teola import App, Engine, Node
from teola.server import ServerSettings, create_server
from tests.support.http import metric, post_and_hang_up, sse
from tests.support.waiting import until

DOCS = [
    "The Eiffel Tower is a lattice tower in Paris. It was designed by the company of Gustave Eiffel.",
    "Gustave Eiffel was a French civil engineer. His company built the tower from 1887 to 1889.",
]
QUERY = {"question": "Who designed the Eiffel Tower?", "documents": DOCS}
FAIL = "EXPLODE"
HANG = "HANG"


class HangingEngine(SimEngine):
    """A sim LLM whose requests containing HANG wait until `release` is set (a query past any limit)."""

    def __init__(self, name: str) -> None:
        super().__init__(name, serial=False)
        self.release = asyncio.Event()
        self.hung = 0  # batches that have reached the engine and wait for `release`

    async def execute(self, op: str, requests: list[dict[str, Any]]) -> list[Any]:
        if HANG in repr(requests):
            self.hung += 1
            await self.release.wait()
        return await super().execute(op, requests)

    async def stream(self, op: str, requests: list[dict[str, Any]]):
        if HANG in repr(requests):
            self.hung += 1
            await self.release.wait()
        async for event in super().stream(op, requests):
            yield event


def make_rag_app() -> tuple[App, dict[str, SimEngine]]:
    """The real advanced-RAG template with sim engines; LLM requests containing FAIL raise."""
    app = build_advanced_rag()
    sims = {
        "llm": SimEngine("llm", fail_on=FAIL),
        "embedding": SimEngine("embedding"),
        "vectordb": SimEngine("vectordb"),
        "reranker": SimEngine("reranker"),
    }
    for name, spec in list(app.engines.items()):
        app.register_engine(Engine(name, kind=spec.kind, **spec.options), backend=sims[name])
    return app, sims


def make_echo_app() -> tuple[App, HangingEngine]:
    app = App("echo")
    llm = HangingEngine("llm")
    app.register_engine(Engine("llm", kind="vllm"), backend=llm)
    app.update_template(
        [
            Node(
                "llm",
                name="answer",
                engine="llm",
                config={
                    "parts": [["instruction", "Answer briefly."], ["question", "$query.question"]],
                    "max_tokens": 8,
                },
            )
        ]
    )
    return app, llm


@asynccontextmanager
async def serve(apps: dict[str, App], settings: ServerSettings) -> AsyncIterator[httpx.AsyncClient]:
    server = create_server(apps, settings)
    async with server.router.lifespan_context(server):
        transport = httpx.ASGITransport(app=server)
        async with httpx.AsyncClient(transport=transport, base_url="http://teola.test", timeout=60) as client:
            client.asgi = server  # for tests that drive the ASGI app directly (client disconnects)
            yield client


@pytest.fixture(scope="module")
async def env() -> AsyncIterator[dict[str, Any]]:
    rag, sims = make_rag_app()
    echo, hanging = make_echo_app()
    settings = ServerSettings(
        max_body_bytes=64 * 1024,
        max_documents=8,
        max_document_chars=4000,
        query_timeout=30,
        documents="memory",
    )
    async with serve({"advanced_rag": rag, "echo": echo}, settings) as client:
        yield {"client": client, "sims": sims, "hanging": hanging, "rag": rag, "echo": echo}
    hanging.release.set()
    assert not any(s.started for s in sims.values()), "engines must stop at server shutdown"


def detail(response: httpx.Response) -> str:
    body = response.json()
    assert set(body) == {"error", "detail"}, body
    return body["detail"]


# ---- endpoints -------------------------------------------------------------------------------------
async def test_engines_started_at_startup_and_ready(env):
    assert all(s.started for s in env["sims"].values())
    c = env["client"]
    assert (await c.get("/healthz")).json() == {"status": "ok"}
    r = await c.get("/readyz")
    assert r.status_code == 200 and r.json()["apps"] == {"advanced_rag": True, "echo": True}


async def test_list_apps(env):
    r = await env["client"].get("/v1/apps")
    assert r.status_code == 200
    apps = {a["name"]: a for a in r.json()["apps"]}
    assert set(apps) == {"advanced_rag", "echo"}
    assert {e["name"] for e in apps["advanced_rag"]["engines"]} == {
        "llm",
        "embedding",
        "vectordb",
        "reranker",
    }
    assert "synthesis" in apps["advanced_rag"]["components"] and apps["advanced_rag"]["ready"]


@pytest.mark.parametrize(
    "fmt, marker", [("text", "llm.prefilling"), ("dot", "digraph"), ("mermaid", "flowchart")]
)
async def test_graph_formats(env, fmt, marker):
    r = await env["client"].get("/v1/apps/advanced_rag/graph", params={"format": fmt})
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain")
    assert marker in r.text


async def test_graph_unknown_format(env):
    r = await env["client"].get("/v1/apps/advanced_rag/graph", params={"format": "svg"})
    assert r.status_code == 422 and "svg" in detail(r)


async def test_query_answers_with_trace(env):
    r = await env["client"].post("/v1/apps/advanced_rag/query", json={"query": QUERY})
    assert r.status_code == 200, r.text
    body = r.json()
    assert set(body) == {"output", "trace", "query_id", "latency"}
    assert isinstance(body["output"], str) and body["output"]
    ops = {t["op"] for t in body["trace"]}
    assert {"embedding", "searching", "reranking", "prefilling"} <= ops
    assert body["query_id"] and body["latency"] >= 0


async def test_query_with_config_overrides(env):
    config = {"passes": {"prefill_split": False}, "policy": "topology", "priority": 1, "timeout": 20}
    r = await env["client"].post("/v1/apps/advanced_rag/query", json={"query": QUERY, "config": config})
    assert r.status_code == 200, r.text
    assert "partial_prefilling" not in {t["op"] for t in r.json()["trace"]}


async def test_query_may_not_switch_the_engine_wide_policy(env):
    r = await env["client"].post(
        "/v1/apps/advanced_rag/query", json={"query": QUERY, "config": {"policy": "fifo"}}
    )
    assert r.status_code == 422 and r.json()["error"] == "policy_switch_not_allowed"
    assert "'topology'" in detail(r) and "allow_policy_switch" in detail(r)
    r = await env["client"].post("/v1/apps/advanced_rag/query", json={"query": QUERY})
    assert r.status_code == 200, r.text
    assert env["rag"].runtime.policy == "topology"


async def test_policy_switch_when_the_server_allows_it():
    echo, hanging = make_echo_app()
    async with serve({"echo": echo}, ServerSettings(allow_policy_switch=True)) as c:
        r = await c.post(
            "/v1/apps/echo/query", json={"query": {"question": "hi"}, "config": {"policy": "fifo"}}
        )
        assert r.status_code == 200, r.text
        assert echo.runtime.policy == "fifo"
    hanging.release.set()
    assert ServerSettings.from_env({"TEOLA_ALLOW_POLICY_SWITCH": "1"}).allow_policy_switch is True


async def test_query_stream_sends_progress_and_the_answer_tokens_before_the_answer(env):
    r = await env["client"].post("/v1/apps/advanced_rag/query", json={"query": QUERY, "stream": True})
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
    events = sse(r.text)
    kinds = [e for e, _ in events]
    assert kinds[0] == "started" and kinds[-3:] == ["answer", "trace", "done"]
    assert set(kinds[1:-3]) == {"progress", "token"}
    answer, trace = events[-3][1], events[-2][1]
    assert answer["text"] and "".join(d["text"] for e, d in events if e == "token") == answer["text"]
    progress = [d for e, d in events if e == "progress"]
    ran = {t["primitive"] for t in trace["trace"] if t["engine"]}
    assert {d["primitive"] for d in progress if d["status"] == "finished"} >= ran
    assert all({"op", "engine", "instance", "batch_size", "t"} <= set(d) for d in progress)
    first_token = kinds.index("token")
    assert any(d["status"] == "started" for d in progress) and "progress" in kinds[1:first_token]


async def asgi_call(server: Any, body: dict, disconnect_when: Callable[[], bool]) -> list[dict]:
    """POST a query straight to the ASGI app; the client hangs up once `disconnect_when()` holds."""
    return await post_and_hang_up(server, "/v1/apps/echo/query", body, disconnect_when)


@pytest.mark.parametrize("stream", [False, True])
async def test_a_client_that_disconnects_cancels_its_query_and_its_engine_work(env, stream):
    c, hanging = env["client"], env["hanging"]
    before_aborted, before_hung = len(hanging.aborted), hanging.hung
    before = (await c.get("/metrics")).text
    await asgi_call(
        c.asgi,
        {"query": {"question": f"{HANG} until I hang up?"}, "stream": stream},
        lambda: hanging.hung > before_hung,
    )  # hang up while its LLM request runs in the engine
    await until(lambda: len(hanging.aborted) > before_aborted)  # the running LLM request was told to stop
    await until(lambda: not env["echo"].runtime.running())
    after = (await c.get("/metrics")).text
    key = 'teola_server_queries_cancelled_total{app="echo",reason="disconnect"}'
    assert metric(after, key) == metric(before, key) + 1
    assert (
        metric(after, 'teola_runtime_cancelled_total{app="echo"}')
        == metric(before, 'teola_runtime_cancelled_total{app="echo"}') + 1
    )


async def test_stream_reports_engine_failure_as_event(env):
    r = await env["client"].post(
        "/v1/apps/advanced_rag/query", json={"query": {**QUERY, "question": f"{FAIL} now?"}, "stream": True}
    )
    assert r.status_code == 200
    events = sse(r.text)
    assert events[0][0] == "started" and events[-1][0] == "error" and "answer" not in [e for e, _ in events]
    assert "llm" in events[-1][1]["detail"] and set(events[-1][1]) == {"status", "error", "detail"}


async def test_upload_documents_then_query(env):
    c = env["client"]
    r = await c.post("/v1/apps/advanced_rag/documents", json={"documents": DOCS[:1]})
    assert r.status_code == 201, r.text
    ids = r.json()["document_ids"]
    files = [("files", ("eiffel.txt", DOCS[1].encode(), "text/plain"))]
    r = await c.post("/v1/apps/advanced_rag/documents", files=files)
    assert r.status_code == 201, r.text
    ids += r.json()["document_ids"]
    r = await c.post(
        "/v1/apps/advanced_rag/documents", content=DOCS[0], headers={"content-type": "text/plain"}
    )
    assert r.status_code == 201
    r = await c.post(
        "/v1/apps/advanced_rag/query", json={"query": {"question": QUERY["question"], "document_ids": ids}}
    )
    assert r.status_code == 200, r.text
    assert (await c.delete(f"/v1/apps/advanced_rag/documents/{ids[0]}")).status_code == 204
    r = await c.post("/v1/apps/advanced_rag/query", json={"query": {"question": "Who?", "document_ids": ids}})
    assert r.status_code == 404 and ids[0] in detail(r)


# ---- bad requests ----------------------------------------------------------------------------------
async def test_malformed_json(env):
    r = await env["client"].post(
        "/v1/apps/advanced_rag/query",
        content=b'{"query": {"question": ',
        headers={"content-type": "application/json"},
    )
    assert r.status_code == 400 and "malformed JSON" in detail(r)


@pytest.mark.parametrize(
    "content, ctype, status, words",
    [
        (
            b'{"documents": ' + b"[" * 10_000 + b"]" * 10_000 + b"}",
            "application/json",
            400,
            "nested too deeply",
        ),
        (b'{"documents": ["caf\xe9"]}', "application/json", 400, "not UTF-8"),
        (b"caf\xe9", "text/plain", 422, "not UTF-8"),
        (b"", "application/json", 400, "body is empty"),
        (b"<doc/>", "application/xml", 415, "unsupported content type"),
        (b'{"documents": ["' + b"x" * (70 * 1024) + b'"]}', "application/json", 413, "limit"),
    ],
)
async def test_malformed_uploads_get_a_json_4xx_naming_the_problem(env, content, ctype, status, words):
    r = await env["client"].post(
        "/v1/apps/advanced_rag/documents", content=content, headers={"content-type": ctype}
    )
    assert r.status_code == status and words in detail(r), r.text
    assert r.headers["content-type"].startswith("application/json")


@pytest.mark.parametrize(
    "body, field",
    [
        ({}, "query"),
        ({"query": {"documents": DOCS}}, "query.question"),
        ({"query": {"question": ""}}, "query.question"),
        ({"query": QUERY, "config": {"timeout": -1}}, "config.timeout"),
    ],
)
async def test_missing_or_invalid_fields(env, body, field):
    r = await env["client"].post("/v1/apps/advanced_rag/query", json=body)
    assert r.status_code == 422 and field in detail(r)


async def test_unknown_app(env):
    r = await env["client"].post("/v1/apps/nope/query", json={"query": QUERY})
    assert r.status_code == 404 and "'nope'" in detail(r) and "advanced_rag" in detail(r)
    assert (await env["client"].get("/v1/apps/nope/graph")).status_code == 404


async def test_oversized_body(env):
    big = {"query": {"question": "q", "documents": ["x" * (70 * 1024)]}}
    r = await env["client"].post("/v1/apps/advanced_rag/query", json=big)
    assert r.status_code == 413 and "limit" in detail(r)


async def test_too_many_and_too_large_documents(env):
    r = await env["client"].post(
        "/v1/apps/advanced_rag/query", json={"query": {"question": "q", "documents": ["d"] * 9}}
    )
    assert r.status_code == 413 and "at most 8" in detail(r)
    r = await env["client"].post(
        "/v1/apps/advanced_rag/query", json={"query": {"question": "q", "documents": ["y" * 5000]}}
    )
    assert r.status_code == 413 and "5000 characters" in detail(r)


async def test_unknown_config_key(env):
    r = await env["client"].post(
        "/v1/apps/advanced_rag/query", json={"query": QUERY, "config": {"pases": {}}}
    )
    assert r.status_code == 422 and "'pases'" in detail(r) and "passes" in detail(r)


async def test_unknown_pass(env):
    r = await env["client"].post(
        "/v1/apps/advanced_rag/query", json={"query": QUERY, "config": {"passes": {"no_such_pass": True}}}
    )
    assert r.status_code == 422 and "no_such_pass" in detail(r)


async def test_unknown_policy(env):
    r = await env["client"].post(
        "/v1/apps/advanced_rag/query", json={"query": QUERY, "config": {"policy": "lifo"}}
    )
    assert r.status_code == 422 and "'lifo'" in detail(r) and "topology" in detail(r)


async def test_unknown_node_in_config(env):
    r = await env["client"].post(
        "/v1/apps/advanced_rag/query",
        json={"query": QUERY, "config": {"nodes": {"no_such_node": {"top_k": 2}}}},
    )
    assert r.status_code == 422 and "no_such_node" in detail(r)


@pytest.mark.parametrize(
    "passes",
    [
        {"prefill_split": {"bogus": 1}},
        {"prefill_split": "yes"},
        {"component_order": {"order": [["nope", "search"]]}},
    ],
)
async def test_pass_options_of_the_wrong_shape_are_a_422(env, passes):
    r = await env["client"].post(
        "/v1/apps/advanced_rag/query", json={"query": QUERY, "config": {"passes": passes}}
    )
    assert r.status_code == 422, r.text
    assert "passes" in detail(r) or "prefill_split" in detail(r)


async def test_health_answers_while_a_slow_compile_runs_and_compile_counts_against_the_timeout(env):
    import threading

    rag, c = env["rag"], env["client"]
    gate = threading.Event()
    real = rag.compile

    def slow_compile(query, config=None):
        gate.wait(5)  # a compile stuck in a worker thread (as a huge graph would be)
        return real(query, config)

    rag.compile = slow_compile
    try:
        slow = asyncio.create_task(
            c.post("/v1/apps/advanced_rag/query", json={"query": QUERY, "config": {"timeout": 0.3}})
        )
        health = await asyncio.wait_for(c.get("/healthz"), 2)
        assert health.status_code == 200 and not slow.done()
        r = await slow
        assert r.status_code == 504 and "compiling" in detail(r)
    finally:
        gate.set()
        rag.compile = real


@pytest.mark.parametrize(
    "query, config, where",
    [
        ({**QUERY, "documents": ["a\x00b"]}, {}, "NUL"),
        ({**QUERY, "question": "who\ud800?"}, {}, "query.question"),
        ({**QUERY, "documents": ["a\udfff b"]}, {}, "surrogate"),
        (QUERY, {"nodes": {"synthesis": {"max_tokens": 10**9}}}, "max_tokens"),
        (QUERY, {"nodes": {"synthesis": {"temperature": -5}}}, "temperature"),
        (QUERY, {"nodes": {"synthesis": {"temperature": "hot"}}}, "temperature"),
        (QUERY, {"nodes": {"synthesis": {"stop": 123}}}, "stop"),
        (QUERY, {"priority": 10**20}, "priority"),
        (QUERY, {"nodes": {"search": {"top_kk": 2}}}, "config.nodes.search.top_kk"),
        (QUERY, {"priority": -(10**20)}, "priority"),
    ],
)
async def test_input_an_engine_would_reject_is_a_422_naming_it(env, query, config, where):
    body = json.dumps({"query": query, "config": config})  # lone surrogates need json.dumps' escapes
    r = await env["client"].post(
        "/v1/apps/advanced_rag/query", content=body, headers={"content-type": "application/json"}
    )
    assert r.status_code == 422, r.text
    assert where in detail(r) or where in r.text


# ---- failures leave the server serving -------------------------------------------------------------
async def test_engine_failure_then_next_query_succeeds(env):
    c = env["client"]
    r = await c.post("/v1/apps/advanced_rag/query", json={"query": {**QUERY, "question": f"{FAIL}: who?"}})
    assert r.status_code == 502, r.text
    text = detail(r)
    assert "llm" in text and "injected failure" in text
    r = await c.post("/v1/apps/advanced_rag/query", json={"query": QUERY})
    assert r.status_code == 200 and r.json()["output"]


async def test_query_time_limit(env):
    c = env["client"]
    r = await c.post(
        "/v1/apps/echo/query", json={"query": {"question": f"{HANG} forever?"}, "config": {"timeout": 0.2}}
    )
    assert r.status_code == 504 and detail(r)
    r = await c.post("/v1/apps/echo/query", json={"query": {"question": "quick?"}})
    assert r.status_code == 200 and r.json()["output"]


async def test_concurrent_queries_counted_in_metrics(env):
    c = env["client"]

    async def one(i: int) -> httpx.Response:
        return await c.post(
            "/v1/apps/advanced_rag/query", json={"query": {**QUERY, "question": f"Question {i}?"}}
        )

    before = _metric(await c.get("/metrics"), 'teola_server_queries_total{app="advanced_rag"}')
    responses = await asyncio.gather(*(one(i) for i in range(50)))
    assert [r.status_code for r in responses] == [200] * 50
    assert len({r.json()["query_id"] for r in responses}) == 50
    text = (await c.get("/metrics")).text
    assert _metric(text, 'teola_server_queries_total{app="advanced_rag"}') == before + 50
    for name in (
        "teola_primitive_latency_seconds_count",
        "teola_primitive_batch_size_count",
        "teola_engine_queue_length",
        "teola_runtime_completed_total",
        "teola_server_queries_failed_total",
        "teola_prefix_cache_hit_tokens_total",
    ):
        assert name in text, name
    assert _metric(text, 'teola_server_queries_failed_total{app="advanced_rag",reason="engine"}') >= 1


def _metric(response_or_text: httpx.Response | str, series: str) -> float:
    text = response_or_text if isinstance(response_or_text, str) else response_or_text.text
    for line in text.splitlines():
        if line.startswith(series + " "):
            return float(line.split()[-1])
    return 0.0


async def test_openapi_served(env):
    r = await env["client"].get("/openapi.json")
    assert r.status_code == 200 and "/v1/apps/{app}/query" in r.json()["paths"]


# ---- API key, settings ------------------------------------------------------------------------------
async def test_api_key():
    app, _ = make_echo_app()
    async with serve({"echo": app}, ServerSettings(api_key="s3cret")) as c:
        assert (await c.get("/healthz")).status_code == 200
        r = await c.post("/v1/apps/echo/query", json={"query": {"question": "hi?"}})
        assert r.status_code == 401 and "Bearer" in detail(r) and r.headers["www-authenticate"] == "Bearer"
        r = await c.get("/v1/apps", headers={"Authorization": "Bearer wrong"})
        assert r.status_code == 401
        r = await c.post(
            "/v1/apps/echo/query",
            json={"query": {"question": "hi?"}},
            headers={"Authorization": "Bearer s3cret"},
        )
        assert r.status_code == 200 and r.json()["output"]


def test_settings_from_env():
    s = ServerSettings.from_env(
        {
            "TEOLA_MAX_BODY_BYTES": "1000",
            "TEOLA_QUERY_TIMEOUT": "2.5",
            "TEOLA_API_KEY": "k",
            "TEOLA_START_ENGINES": "false",
        }
    )
    assert (s.max_body_bytes, s.query_timeout, s.api_key, s.start_engines) == (1000, 2.5, "k", False)
    assert ServerSettings.from_env({"TEOLA_MAX_DOCUMENTS": "3"}, max_documents=5).max_documents == 5
    with pytest.raises(ValueError, match="TEOLA_MAX_DOCUMENTS"):
        ServerSettings.from_env({"TEOLA_MAX_DOCUMENTS": "many"})
    with pytest.raises(ValueError, match="max_documents"):
        ServerSettings(max_documents=0)


def test_create_server_rejects_non_apps():
    with pytest.raises(TypeError, match="not a teola App"):
        create_server({"x": object()})
    with pytest.raises(ValueError, match="non-empty"):
        create_server({})


async def test_a_query_whose_graph_is_too_large_is_a_413_naming_the_limit():
    app, _ = make_rag_app()
    async with serve({"rag": app}, ServerSettings(max_primitives=4)) as c:
        r = await c.post("/v1/apps/rag/query", json={"query": QUERY})
        assert r.status_code == 413 and r.json()["error"] == "graph_too_large"
        assert "TEOLA_MAX_PRIMITIVES" in r.json()["detail"]


@pytest.mark.parametrize(
    "body",
    [
        b'{"query": {"question": "q", "x": ' + b"[" * 20_000 + b"]" * 20_000 + b"}}",
        b'{"query": {"question": "\xff"}}',
    ],
)
async def test_undecodable_or_absurdly_nested_bodies_are_a_json_400(env, body):
    r = await env["client"].post(
        "/v1/apps/advanced_rag/query", content=body, headers={"content-type": "application/json"}
    )
    assert r.status_code == 400 and r.json()["error"] == "malformed_json", r.text
