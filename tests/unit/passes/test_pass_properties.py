"""Property tests over random templates and configs: every pass keeps the graph acyclic and every
data dependency; running the pipeline a second time changes nothing; no LLM call is lost."""

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from teola import App, Node, PrimOp
from teola.passes import pass_names, run_pipeline
from tests.factories import make_engines

ANNO = st.sampled_from([None, "batchable"])
OPTIMIZATIONS = [
    "prune_covered_searches",
    "prune_dependencies",
    "stage_decomposition",
    "prefill_split",
    "decode_pipelining",
]


@st.composite
def apps_and_queries(draw):
    app = make_engines(
        App("random"),
        max_eff={"embedding": draw(st.integers(1, 6)), "vectordb": draw(st.integers(1, 6)), "llm": 8},
    )
    nodes: list[Node] = []
    text_nodes: list[Node] = []
    if draw(st.booleans()):  # a retrieval pipeline
        index = Node(
            "indexing",
            engine="embedding",
            anno=draw(ANNO),
            config={"chunk_size": draw(st.integers(8, 40)), "chunk_overlap": draw(st.integers(0, 4))},
        )
        ingest = Node("ingestion", engine="vectordb", anno=draw(ANNO))
        embed = Node("query_embedding", engine="embedding", anno=draw(ANNO))
        search = Node("search", engine="vectordb", config={"top_k": draw(st.integers(1, 6))})
        index >> ingest >> search
        nodes += [index, ingest, embed, search]
        if draw(st.booleans()):
            expand = Node(
                "query_expansion",
                engine="llm",
                anno=draw(st.sampled_from([None, "splittable"])),
                config={"num_queries": draw(st.integers(1, 4))},
            )
            expand >> embed
            nodes.append(expand)
        embed >> search
        last = search
        if draw(st.booleans()):
            rerank = Node("rerank", engine="reranker", config={"top_n": draw(st.integers(1, 4))})
            search >> rerank
            nodes.append(rerank)
            last = rerank
        synth = Node(
            "synthesis",
            engine="llm",
            config={
                "mode": draw(st.sampled_from(["compact", "refine", "tree"])),
                "fan_in": draw(st.integers(2, 3)),
            },
        )
        last >> synth
        nodes.append(synth)
        text_nodes.append(synth)
    for i in range(draw(st.integers(0 if nodes else 1, 3))):  # a DAG of generic LLM calls
        parents = [n for n in text_nodes if draw(st.booleans())]
        parts = [["instruction", f"Step {i}."], ["question", "$query.question"]]
        if parents:
            parts.append(["previous", "$text"])
        node = Node("llm", name=f"step{i}", engine="llm", config={"parts": parts, "max_tokens": 8})
        for p in parents:
            p >> node
        nodes.append(node)
        text_nodes.append(node)
    # extra template edges that carry no data (pruning should drop them)
    for a in range(len(nodes)):
        for b in range(a + 1, len(nodes)):
            if (
                draw(st.integers(0, 9)) == 0
                and nodes[b] not in nodes[a].downstream
                and not _reaches(nodes[b], nodes[a])
            ):
                nodes[a] >> nodes[b]
    app.update_template(nodes)
    words = draw(st.integers(0, 300))
    query = {"question": "What is the answer?", "documents": ["word " * words] if words else []}
    passes = {name: draw(st.booleans()) for name in OPTIMIZATIONS}
    return app, query, {"passes": passes}


def _reaches(a: Node, b: Node) -> bool:
    stack, seen = [a], set()
    while stack:
        n = stack.pop()
        if n is b:
            return True
        if id(n) not in seen:
            seen.add(id(n))
            stack.extend(n.downstream)
    return False


def _llm_calls(g):
    streams = {p.args["stream"] for p in g.find(PrimOp.PARTIAL_DECODING)}
    return len(g.find(PrimOp.DECODING)) + len(streams)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(apps_and_queries())
def test_passes_keep_graph_sound_and_reach_a_fixed_point(case):
    app, query, config = case
    compiled = app.compile(query, config)
    p, e = compiled.pgraph, compiled.egraph
    p.lint()
    e.lint()  # acyclic, every read has a writer with an edge to the reader, engines support ops
    again, applied = run_pipeline(e, config["passes"], lint=True)
    assert applied == []
    again.assign_depths()
    assert again.to_text() == e.to_text()
    # only covered-search pruning may drop LLM calls (the expansion that fed the searches it drops)
    kept = p
    if config["passes"]["prune_covered_searches"]:
        kept, _ = run_pipeline(p, {n: n == "prune_covered_searches" for n in pass_names()}, lint=True)
    assert _llm_calls(kept) == _llm_calls(e)
    writers = e.producers()
    for key in e.outputs:
        assert key in writers
    # every prefill that survives pruning still completes its prompt exactly once
    full = [x.outputs[0] for x in e.primitives if x.op in (PrimOp.PREFILLING, PrimOp.FULL_PREFILLING)]
    assert sorted(full) == sorted(x.outputs[0] for x in kept.find(PrimOp.PREFILLING))


@settings(max_examples=60, deadline=None)
@given(apps_and_queries())
def test_each_pass_alone_keeps_every_data_dependency(case):
    app, query, _ = case
    base = app.compile(query, {"passes": {n: False for n in pass_names()}}).egraph
    base.lint()
    for name in pass_names():
        only = {n: n == name for n in pass_names()}
        g, _ = run_pipeline(base, only, lint=True)
        g.lint()


@settings(max_examples=40, deadline=None)
@given(apps_and_queries())
def test_module_chain_baseline_orders_components_totally(case):
    app, query, _ = case
    g = app.compile(query, {"passes": {n: n == "module_chain" for n in pass_names()}}).egraph
    g.lint()
    comps = []
    for p in g.primitives:
        if p.component not in comps:
            comps.append(p.component)
    import networkx as nx

    for a, b in zip(comps, comps[1:]):
        for u in g.find(component=a):
            for v in g.find(component=b):
                assert nx.has_path(g.nx, u.id, v.id)
