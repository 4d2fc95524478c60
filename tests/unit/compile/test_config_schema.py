"""One schema for configuration: every component option and pass option typed and bounded,
unknown keys rejected, the path of each problem named, for the library and over HTTP alike."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from teola import App, Engine, Node, register_component
from teola.compile.components import lookup, options_model
from teola.compile.components.options import BUILTIN_OPTIONS, Options
from teola.compile.config_schema import nodes_schema, passes_schema

QUERY = {"question": "q?", "documents": ["alpha beta gamma " * 40]}


def rag():
    from apps import advanced_rag

    return advanced_rag.build()


@pytest.mark.parametrize(
    "node,options,path",
    [
        ("search", {"top_k": "5"}, "config.nodes.search.top_k: Input should be a valid integer"),
        ("search", {"top_k": True}, "config.nodes.search.top_k: Input should be a valid integer"),
        ("search", {"top_k": 0}, "config.nodes.search.top_k: Input should be greater than or equal to 1"),
        (
            "synthesis",
            {"temperature": -5},
            "config.nodes.synthesis.temperature: Input should be greater than or equal to 0",
        ),
        (
            "synthesis",
            {"temperature": "hot"},
            "config.nodes.synthesis.temperature: Input should be a valid number",
        ),
        (
            "synthesis",
            {"max_tokens": 10**9},
            "config.nodes.synthesis.max_tokens: Input should be less than or equal to 32768",
        ),
        ("synthesis", {"stop": 123}, "config.nodes.synthesis.stop"),
        ("synthesis", {"instruction": 123}, "config.nodes.synthesis.instruction"),
        (
            "synthesis",
            {"instruction": "a\x00b"},
            "config.nodes.synthesis.instruction: Value error, contains a NUL",
        ),
        (
            "query_expansion",
            {"task": "x\ud800y"},
            "config.nodes.query_expansion.task: Input should be a valid string, "
            "unable to parse raw data as a unicode string",
        ),
        (
            "synthesis",
            {"mode": "fast"},
            "config.nodes.synthesis.mode: Input should be 'compact', 'refine' or 'tree'",
        ),
        ("indexing", {"chunk_size": 1.5}, "config.nodes.indexing.chunk_size"),
        ("rerank", {"top_n": 3, "chunk_size": 3}, "config.nodes.rerank.chunk_size: unknown option"),
    ],
)
def test_bad_node_options_are_named_by_path(node, options, path):
    with pytest.raises(ValueError) as err:
        rag().compile(QUERY, {"nodes": {node: options}})
    assert path in str(err.value)


def test_every_problem_is_reported_and_good_options_compile():
    with pytest.raises(ValueError) as err:
        rag().compile(QUERY, {"nodes": {"search": {"top_k": 0, "top_kk": 1}}})
    assert "config.nodes.search.top_k:" in str(
        err.value
    ) and "config.nodes.search.top_kk: unknown option" in str(err.value)
    compiled = rag().compile(
        QUERY, {"nodes": {"search": {"top_k": 4}, "synthesis": {"temperature": 0.5, "stop": ["\n\n"]}}}
    )
    assert compiled.egraph.primitives


def test_the_apps_own_config_is_checked_by_the_same_model():
    app = App("bad")
    app.register_engine(Engine("llm", kind="vllm", model="m"))
    with pytest.raises(
        ValueError, match=r"node 'answer' config.max_tokens: Input should be greater than or equal to 1"
    ):
        app.update_template([Node("llm", name="answer", engine="llm", config={"max_tokens": 0})])


def test_every_builtin_kind_declares_its_options():
    from teola.compile.components import component_kinds

    assert set(BUILTIN_OPTIONS) == set(component_kinds())
    for kind, model in BUILTIN_OPTIONS.items():
        assert model.model_config["extra"] == "forbid" and model.model_config["strict"], kind


def test_a_registered_kind_brings_its_options_model():
    class EchoOptions(Options):
        times: int = 1

    fn = lookup("llm")[0]
    register_component("echo_llm", fn, options=EchoOptions)
    try:
        assert options_model("echo_llm") is EchoOptions
        assert (
            nodes_schema([Node("echo_llm", name="e")])["properties"]["e"]["properties"]["times"]["type"]
            == "integer"
        )
    finally:
        register_component("echo_llm", fn)
    assert options_model("echo_llm") is None
    with pytest.raises(TypeError, match="subclass of teola.compile.components.options.Options"):
        register_component("echo_llm", fn, options=dict)


def test_schemas_name_every_node_and_pass():
    app = rag()
    schema = nodes_schema(app.nodes)
    assert (
        set(schema["properties"]) == {n.name for n in app.nodes} and schema["additionalProperties"] is False
    )
    top_k = schema["properties"]["search"]["properties"]["top_k"]["anyOf"][0]
    assert (top_k["minimum"], top_k["maximum"]) == (1, 10_000)
    partials = passes_schema()["properties"]["prefill_split"]["anyOf"][1]["properties"]["max_partials"]
    assert (partials["minimum"], partials["maximum"]) == (1, 64)


def test_http_rejects_bad_options_with_422_naming_the_path_and_publishes_the_schema():
    from teola.server.api import create_server

    client = TestClient(create_server({"advanced_rag": rag()}))
    r = client.post(
        "/v1/apps/advanced_rag/query",
        json={"query": QUERY, "config": {"nodes": {"rerank": {"top_n": 10**9}}}},
    )
    assert r.status_code == 422
    assert "config.nodes.rerank.top_n: Input should be less than or equal to 10000" in r.json()["detail"]
    schema = client.get("/v1/apps/advanced_rag/config_schema").json()
    assert schema["nodes"]["properties"]["rerank"]["properties"]["top_n"]
    assert client.get("/v1/apps/nope/config_schema").status_code == 404
    doc = client.get("/openapi.json").json()
    nodes = doc["components"]["schemas"]["QueryConfig"]["properties"]["nodes"]["anyOf"][0]
    titles = {s["title"] for s in nodes["additionalProperties"]["anyOf"]}
    assert {f"{kind} options" for kind in BUILTIN_OPTIONS} <= titles
