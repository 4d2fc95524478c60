"""Door calls are seen and stopped like queries (on simulated engines): each is counted in /metrics,
listed in /ui's recent list and recorded as an OpenTelemetry span; a W3C traceparent puts the
spans of either door inside the caller's trace; a client that hangs up on a non-streamed call
cancels it and its running engine request is aborted."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from engines.sim.sim_engine import SimEngine
from tests.support.http import metric, post_and_hang_up, sse
from tests.support.otel import MemoryTelemetry
from tests.support.waiting import until
from tests.unit.server.test_openai_door import serve
from tests.unit.server.test_server import HANG, HangingEngine

TRACE_ID, CALLER_SPAN = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
TRACEPARENT = {"traceparent": f"00-{TRACE_ID}-{CALLER_SPAN}-01"}
USER = [{"role": "user", "content": "Name a fruit."}]


def in_callers_trace(span: Any) -> bool:
    return (
        f"{span.context.trace_id:032x}" == TRACE_ID
        and span.parent is not None
        and f"{span.parent.span_id:016x}" == CALLER_SPAN
    )


async def test_a_door_call_is_counted_listed_and_traced_in_the_callers_trace():
    otel = MemoryTelemetry()
    async with serve(telemetry=otel.telemetry) as (http, _, _llm):
        ok = await http.post(
            "/v1/chat/completions",
            headers={**TRACEPARENT, "x-teola-program": "p"},
            json={"model": "agent", "max_tokens": 8, "messages": USER},
        )
        assert ok.status_code == 200, ok.text
        [span] = otel.spans()
        assert span.name == "chat llm"  # `{operation} {model}`: the engine's name when it names no model
        assert in_callers_trace(span) and span.attributes["teola.program"] == "default/p"
        assert span.attributes["gen_ai.response.id"] == ok.json()["id"]
        assert span.attributes["gen_ai.usage.output_tokens"] == ok.json()["usage"]["completion_tokens"]
        assert span.attributes["gen_ai.response.finish_reasons"] == ("stop",)
        listed = (await http.get("/v1/ui/queries")).json()["queries"]
        assert [(q["query_id"], q["kind"], q["status"], q["question"]) for q in listed] == [
            (ok.json()["id"], "openai", "ok", "Name a fruit.")
        ]
        detail = (await http.get(f"/v1/ui/queries/{ok.json()['id']}")).json()
        assert detail["trace"][0]["engine"] == "llm" and detail["trace"][0]["instance"]
        text = (await http.get("/metrics")).text
        assert metric(text, 'teola_server_queries_total{app="agent"}') == 1
        assert metric(text, 'teola_server_query_latency_seconds_count{app="agent"}') == 1


async def test_a_failed_door_call_is_an_openai_502_counted_and_listed():
    async with serve(engine=SimEngine("llm", fail_on="EXPLODE")) as (http, _, _llm):
        r = await http.post(
            "/v1/chat/completions",
            json={"model": "agent", "messages": [{"role": "user", "content": "EXPLODE"}]},
        )
        assert r.status_code == 502 and r.json()["error"]["type"] == "server_error"
        assert r.json()["error"]["code"] == "engine_failed"
        assert (await http.get("/v1/ui/queries")).json()["queries"][0]["status"] == "failed"
        text = (await http.get("/metrics")).text
        assert metric(text, 'teola_server_queries_failed_total{app="agent",reason="engine"}') == 1


@pytest.mark.parametrize("stream", [False, True])
async def test_the_query_door_honours_traceparent(stream):
    otel = MemoryTelemetry()
    async with serve(telemetry=otel.telemetry) as (http, _, _llm):
        r = await http.post(
            "/v1/apps/agent/query",
            headers=TRACEPARENT,
            json={"query": {"question": "Name a fruit."}, "stream": stream},
        )
        assert r.status_code == 200, r.text
        query_id = sse(r.text)[-1][1]["query_id"] if stream else r.json()["query_id"]
        [root] = [s for s in otel.spans() if s.attributes.get("teola.query_id") == query_id]
        assert in_callers_trace(root)
        untraced = await http.post("/v1/apps/agent/query", json={"query": {"question": "Again?"}})
        [other] = [
            s for s in otel.spans() if s.attributes.get("teola.query_id") == untraced.json()["query_id"]
        ]
        assert f"{other.context.trace_id:032x}" != TRACE_ID and other.parent is None


async def call_and_hang_up(server: Any, body: dict, hang_up_when: Callable[[], bool]) -> list[dict]:
    """POST a chat completion straight to the ASGI app; the client hangs up once `hang_up_when()` holds."""
    return await post_and_hang_up(server, "/v1/chat/completions", body, hang_up_when)


async def test_a_client_that_hangs_up_cancels_its_non_streamed_call():
    hanging = HangingEngine("llm")
    async with serve(engine=hanging) as (http, app, llm):
        body = {"model": "agent", "messages": [{"role": "user", "content": f"{HANG} until I hang up"}]}
        await call_and_hang_up(http._transport.app, body, lambda: hanging.hung > 0)
        tag = llm.requests[-1]["tag"]
        await until(lambda: tag in hanging.aborted)  # the running engine request was told to stop
        hanging.release.set()  # a simulated request runs on after its abort: let it end
        await until(lambda: not app.runtime.schedulers["llm"].tasks())
        text = (await http.get("/metrics")).text
        assert metric(text, 'teola_server_queries_cancelled_total{app="agent",reason="disconnect"}') == 1
        assert (await http.get("/v1/ui/queries")).json()["queries"][0]["status"] == "cancelled"
