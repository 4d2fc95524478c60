"""OpenTelemetry spans and GenAI metrics of queries on simulated engines (real OpenTelemetry SDK,
in-memory exporters)."""

import pytest

from engines.sim.sim_engine import sim_engines
from teola import telemetry as tel
from teola.ir.ops import PrimOp
from teola.runtime import QueryTimeout
from teola.telemetry.attributes import primitive_attributes, span_name
from tests.support.otel import MemoryTelemetry, query_tree
from tests.unit.runtime.test_runtime import QUERY, make_rag


async def run_traced(config=None, capture=False):
    mem = MemoryTelemetry(capture_content=capture)
    app = make_rag(sim_engines())
    app.telemetry = mem.telemetry
    try:
        compiled = app.compile(QUERY, config)
        result = await app.execute(compiled, config)
    finally:
        await app.stop()
    return mem, compiled, result


async def test_one_span_per_primitive_linked_like_the_egraph():
    mem, compiled, result = await run_traced()
    root, kids = query_tree(mem.spans(), result.query_id)
    assert root.name == "query rag" and root.parent is None
    assert set(kids) == {p.name for p in compiled.egraph.primitives} == {t["primitive"] for t in result.trace}
    ids = {s.context.span_id: name for name, s in kids.items()}
    for p in compiled.egraph.primitives:
        linked = sorted(ids[link.context.span_id] for link in kids[p.name].links)
        assert linked == sorted(q.name for q in compiled.egraph.parents(p)), p.name
        assert kids[p.name].attributes["teola.depth"] == p.depth
    assert root.start_time <= min(s.start_time for s in kids.values())
    assert root.end_time >= max(s.end_time for s in kids.values())


async def test_llm_spans_carry_genai_attributes_and_queue_events():
    mem, compiled, result = await run_traced()
    _, kids = query_tree(mem.spans(), result.query_id)
    decodes = [s for s in kids.values() if s.attributes["teola.op"] in ("decoding", "partial_decoding")]
    assert decodes
    for s in decodes:
        a = s.attributes
        assert a["gen_ai.operation.name"] == "chat" and a["gen_ai.provider.name"] == "vllm"
        assert a["gen_ai.request.max_tokens"] >= 1 and "gen_ai.request.temperature" in a
        assert a["gen_ai.usage.output_tokens"] > 0 and a["gen_ai.usage.input_tokens"] > 0
        assert [e.name for e in s.events] == ["teola.queued", "teola.started"]
        assert s.events[0].timestamp <= s.events[1].timestamp <= s.end_time
    llm = [s for s in kids.values() if s.attributes.get("teola.engine") == "llm"]
    assert {s.attributes["teola.op"] for s in llm} >= {"prefilling", "partial_decoding"}
    for s in llm:  # a prefill fused into a streamed decode carries that call's counts too
        assert s.attributes["gen_ai.usage.input_tokens"] > 0, s.attributes["teola.ir.primitive"]
        assert "gen_ai.usage.cache_read.input_tokens" in s.attributes
    search = [s for s in kids.values() if s.attributes["teola.op"] == "searching"]
    assert search and all(s.name == "retrieval vectordb" for s in search)
    assert any(s.attributes["teola.critical_path"] for s in kids.values())


async def test_no_text_unless_content_capture_is_on():
    mem, compiled, result = await run_traced()
    texts = [str(v) for s in mem.spans() for v in s.attributes.values()]
    assert not any("capital of france" in t or result.output in t for t in texts)
    mem, compiled, result = await run_traced(capture=True)
    root, _ = query_tree(mem.spans(), result.query_id)
    assert "capital of france" in root.attributes["gen_ai.input.messages"]
    assert result.output in root.attributes["gen_ai.output.messages"]


async def test_genai_metrics_count_each_llm_call_once():
    mem, compiled, result = await run_traced()
    tokens = mem.metric_points("gen_ai.client.token.usage")
    out = [p for p in tokens if p.attributes["gen_ai.token.type"] == "output"]
    decoded = {}  # one engine call per (batch, dispatch): fused prefills and stream members share it
    for t in result.trace:
        if t["op"] in ("decoding", "partial_decoding"):
            decoded[(t["batch_id"], t["queued"])] = t["num_output_tokens"]
    assert sum(p.sum for p in out) == sum(decoded.values())
    durations = mem.metric_points("gen_ai.client.operation.duration")
    assert {p.attributes["gen_ai.operation.name"] for p in durations} >= {"chat", "embeddings"}


async def test_a_failed_query_ends_its_span_with_an_error():
    mem = MemoryTelemetry()
    sims = sim_engines()
    sims["llm"].latency = {1: 0.5}
    app = make_rag(sims)
    app.telemetry = mem.telemetry
    try:
        with pytest.raises(QueryTimeout):
            await app.run(QUERY, {"timeout": 0.05})
    finally:
        await app.stop()
    [root] = [s for s in mem.spans() if s.parent is None]
    assert root.status.status_code.name == "ERROR" and "timed out" in root.status.description


def test_attributes_of_a_tool_and_a_prefill():
    entry = {
        "primitive": "tools.call",
        "depth": 1,
        "status": "ok",
        "queued": 0.0,
        "started": 0.1,
        "finished": 0.3,
    }
    a = primitive_attributes(entry, PrimOp.TOOL, {"allowed": ["calculator"]}, "tool", None)
    assert a["gen_ai.operation.name"] == "execute_tool" and a["gen_ai.tool.name"] == "calculator"
    assert span_name(PrimOp.TOOL, "tools.call", "tools", None, "calculator") == "execute_tool calculator"
    assert a["teola.queue_seconds"] == pytest.approx(0.1) and a["teola.run_seconds"] == pytest.approx(0.2)
    pre = primitive_attributes(
        {**entry, "num_prompt_tokens": 40, "num_cached_tokens": 32},
        PrimOp.PARTIAL_PREFILLING,
        {"max_tokens": 64},
        "vllm",
        "m",
    )
    assert pre["gen_ai.request.max_tokens"] == 1 and pre["gen_ai.usage.output_tokens"] == 0
    assert pre["gen_ai.usage.cache_read.input_tokens"] == 32 and pre["gen_ai.request.model"] == "m"
    assert "gen_ai.operation.name" not in primitive_attributes(entry, PrimOp.INGESTION, {}, "pgvector", None)


def test_off_without_an_endpoint_and_a_clear_error_when_asked_without_the_sdk(monkeypatch):
    import builtins

    for var in tel.ENDPOINT_VARS:
        monkeypatch.delenv(var, raising=False)
    tel.telemetry_from_env.cache_clear()
    assert tel.telemetry_from_env() is None
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318")
    real_import = builtins.__import__

    def no_otel(name, *args, **kwargs):
        if name.startswith("opentelemetry"):
            raise ImportError(f"No module named {name!r}")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_otel)
    monkeypatch.delitem(__import__("sys").modules, "teola.telemetry.otlp", raising=False)
    tel.telemetry_from_env.cache_clear()
    with pytest.raises(ImportError, match="OTEL_EXPORTER_OTLP_ENDPOINT.*pip install"):
        tel.telemetry_from_env()
    tel.telemetry_from_env.cache_clear()


def test_an_endpoint_builds_an_otlp_exporter(monkeypatch):
    from teola.telemetry.otlp import otlp_providers

    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318")
    monkeypatch.setenv(tel.CAPTURE_VAR, "true")
    tel.telemetry_from_env.cache_clear()
    try:
        t = tel.telemetry_from_env()
        assert t is not None and t.capture_content
        assert type(t.tracer).__module__.startswith("opentelemetry.sdk")
    finally:
        tel.telemetry_from_env.cache_clear()
    monkeypatch.setenv("OTEL_METRICS_EXPORTER", "none")
    _, meters = otlp_providers()
    assert list(meters._metric_readers) == []
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "thrift")
    with pytest.raises(ValueError, match="grpc"):
        otlp_providers()
