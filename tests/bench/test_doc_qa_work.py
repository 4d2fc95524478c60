"""Document QA's work per query: what llm_work and summarize count from engine traces, and the
PubMedQA workload (short factual passages, each question's abstract among 15 others)."""

from bench.lib.workloads import pubmed_qa_queries
from bench.studies.rag.doc_qa_runs import llm_work, summarize


def test_llm_work_counts_prefill_only_requests_and_chunks():
    trace = [
        {"primitive": "ingestion.ingest[0:8]", "op": "ingestion", "requests": 8},
        {"primitive": "ingestion.ingest[8:11]", "op": "ingestion", "requests": 3},
        {"primitive": "synthesis.leaf0.prefill.partial0", "op": "partial_prefilling", "status": "ok"},
        {"primitive": "synthesis.call1.prefill.partial0", "op": "partial_prefilling", "status": "skipped"},
        {
            "primitive": "expand.decode[0]",
            "op": "partial_decoding",
            "num_prompt_tokens": 50,
            "num_output_tokens": 9,
        },
        {
            "primitive": "expand.decode[1]",
            "op": "partial_decoding",
            "num_prompt_tokens": 50,
            "num_output_tokens": 20,
        },
        {
            "primitive": "synthesis.leaf0.decode",
            "op": "decoding",
            "num_prompt_tokens": 700,
            "num_output_tokens": 30,
        },
    ]
    assert llm_work(trace) == {
        "calls": 2,
        "prompt_tokens": 750,
        "decode_tokens": 50,
        "prefill_only": 1,
        "chunks": 11,
    }


def test_llm_work_counts_a_library_baselines_ingested_items():
    trace = [
        {"primitive": "llamaindex.ingestion0", "op": "ingestion", "batch_size": 7},
        {
            "primitive": "llamaindex.decoding1",
            "op": "decoding",
            "num_prompt_tokens": 600,
            "num_output_tokens": 12,
        },
    ]
    assert llm_work(trace) == {
        "calls": 1,
        "prompt_tokens": 600,
        "decode_tokens": 12,
        "prefill_only": 0,
        "chunks": 7,
    }


def test_summarize_reports_chunks_per_document_and_prefill_only_requests():
    recs = [
        {
            "ok": True,
            "latency": 1.0,
            "calls": 1,
            "prompt_tokens": 10,
            "decode_tokens": 2,
            "contains": 1,
            "f1": 0.5,
            "prefill_only": 1,
            "chunks": 12,
            "documents": 4,
        },
        {
            "ok": True,
            "latency": 3.0,
            "calls": 1,
            "prompt_tokens": 20,
            "decode_tokens": 4,
            "contains": 0,
            "f1": 0.1,
            "prefill_only": 0,
            "chunks": 6,
            "documents": 3,
        },
    ]
    out = summarize(recs)
    assert out["chunks_per_doc"] == 2.5 and out["prefill_only"] == 0.5 and out["mean"] == 2.0


def test_pubmed_qa_queries_hide_each_abstract_among_others():
    queries = pubmed_qa_queries(4, distractors=15, seed=0)
    assert len(queries) == 4 and len({q["question"] for q in queries}) == 4
    for q in queries:
        assert len(q["documents"]) == 16 and len(set(q["documents"])) == 16
        assert q["gold"] in q["documents"] and q["answers"][0] in ("yes", "no", "maybe")
    assert pubmed_qa_queries(4, 15, 0) == queries and pubmed_qa_queries(4, 15, 1) != queries


def test_teolas_chunks_are_sized_as_llamaindexs_sentence_splitter_sizes_them():
    from llama_index.core.node_parser import SentenceSplitter
    from llama_index.core.schema import Document

    from bench.lib.workloads import narrative_qa_queries
    from teola.compile.chunk_tokenizer import chunk_tokenizer
    from teola.compile.chunking import chunk_text
    from teola.ir.engine_spec import Engine

    tok = chunk_tokenizer(Engine("embedding", kind="sentence_transformers", model="all-minilm-l6-v2"))
    assert tok is not None, "all-MiniLM-L6-v2's tokenizer is installed by the project's setup"
    splitter = SentenceSplitter(chunk_size=256, chunk_overlap=30, tokenizer=lambda t: [None] * tok.count(t))
    docs = list(
        dict.fromkeys(
            d for q in pubmed_qa_queries(3, 15, 0) + narrative_qa_queries(3, 2, 0) for d in q["documents"]
        )
    )
    library = [len(splitter.get_nodes_from_documents([Document(text=d)])) for d in docs]
    assert [len(chunk_text(d, 256, 30, tok)) for d in docs] == library  # the default split: sentence
    assert [len(chunk_text(d, 256, 30, tok, split="window")) for d in docs] != library


def test_alone_runs_interleave_the_systems_in_a_rotating_order():
    import asyncio

    from bench.studies.rag.doc_qa_runs import compare

    class FakeSystems:
        names = ("teola", "LlamaIndex", "teola, expansion kept")
        inflight: dict = {}

        def __init__(self) -> None:
            self.calls: list[tuple[str, str]] = []
            self.steps = {"decode_steps": 2, "generated_tokens": 6, "tokens_per_decode_step": 3.0}

        async def run(self, system, queries, arrivals):
            self.calls += [(system, q["question"]) for q in queries]
            return [
                {
                    "ok": True,
                    "latency": 1.0,
                    "calls": 1,
                    "prompt_tokens": 1,
                    "decode_tokens": 1,
                    "contains": 0,
                    "f1": 0.0,
                }
                for _ in queries
            ]

    fake = FakeSystems()
    queries = [{"question": f"q{i}"} for i in range(3)]
    points = asyncio.run(compare(fake, queries, 3, 2, (1.0,), 0, "t", progress=False))  # type: ignore[arg-type]
    alone = fake.calls[:9]
    assert [s for s, _ in alone] == [
        "teola",
        "LlamaIndex",
        "teola, expansion kept",
        "LlamaIndex",
        "teola, expansion kept",
        "teola",
        "teola, expansion kept",
        "teola",
        "LlamaIndex",
    ]
    assert [q for _, q in alone] == ["q0"] * 3 + ["q1"] * 3 + ["q2"] * 3
    assert [s for s, _ in fake.calls[9::2]] == [
        "LlamaIndex",
        "teola, expansion kept",
        "teola",
    ]  # rate 1: rotated
    steps = points["alone"]["teola"]["vllm_steps"]
    assert steps["decode_steps"] == 6 and steps["tokens_per_decode_step"] == 3.0
