"""The systems document QA compares and the settings of a run (bench.studies.rag.doc_qa)."""

from __future__ import annotations

from dataclasses import dataclass, field

from bench.studies.rag.rag_setup import PAPER_BASELINES

QUERY_TIMEOUT = 600.0
SYSTEMS = ("teola", "LlamaIndex")
# --baselines: the Teola paper's baselines (bench.studies.rag.rag_setup.SYSTEMS: module chain or parallel
# modules, every optimization off, PO or TO batching) on teola's runtime over the same engines
BASELINES = PAPER_BASELINES
# --keep-expansion: teola with pass prune_covered_searches off on advanced RAG (what the pass saves)
KEEP_EXPANSION = "teola, expansion kept"
TEOLA_PASSES = {"teola": {}, KEEP_EXPANSION: {"prune_covered_searches": False}}
# --ungated: teola with pass prefill_split's gate off (every ready prefix split, as before the gate);
# on advanced RAG with --keep-expansion, the expansion-kept system ungated instead (equal work)
UNGATED = "teola, prefill split ungated"
UNGATED_KEPT = f"{KEEP_EXPANSION}, prefill split ungated"
TEOLA_PASSES.update(
    {
        UNGATED: {"prefill_split": {"gate": False}},
        UNGATED_KEPT: {"prune_covered_searches": False, "prefill_split": {"gate": False}},
    }
)
# --langgraph (with --remote-llm): LangGraph's graph with ChatOpenAI on the same server
# (bench/baselines/langgraph_rag.py), on the flows whose synthesis is compact
LANGGRAPH = "LangGraph"


@dataclass
class Settings:
    apps: tuple[str, ...] = ("naive_rag", "advanced_rag")
    sizes: dict[str, int] = field(default_factory=lambda: {"small": 2, "large": 28})  # distractor stories
    n_alone: int = 3
    n_load: int = 6
    fractions: tuple[float, ...] = (0.5, 1.0, 1.5, 2.0)
    rates: tuple[float, ...] = ()  # absolute Poisson rates (q/s) instead of fractions
    same_mode: str | None = "refine"  # both systems forced to this mode (advanced RAG, small docs)
    same_mode_fractions: tuple[float, ...] = (1.0,)
    seed: int = 0
    trial: int = 0  # Poisson arrivals use seed + trial (same queries every trial)
    keep_expansion: bool = False  # also run KEEP_EXPANSION on advanced RAG
    embedding_batch: int | None = None  # None: the embedder's shipped max efficient batch
    baselines: tuple[str, ...] = ()  # BASELINES also run, on the default flows (not same_mode)
    langgraph: bool = False  # LANGGRAPH also runs (remote LLM only, compact flows)
    passes_off: tuple[str, ...] = ()  # with keep_expansion: KEEP_EXPANSION with each of these passes off too
    data: str = "narrativeqa"  # bench.lib.workloads.GOLD_SETS: narrativeqa or pubmedqa
    ungated: bool = False  # also run UNGATED (and UNGATED_KEPT with keep_expansion)

    @classmethod
    def quick(cls) -> Settings:
        """A few minutes with engine start-up: naive RAG, small documents, 2 alone, one rate of 3."""
        return cls(
            apps=("naive_rag",), sizes={"small": 2}, n_alone=2, n_load=3, fractions=(1.0,), same_mode=None
        )


SERVER_URLS: list[str] = []  # the `vllm serve` processes of a --remote-llm run (their load is sampled)
INFLIGHT_EVERY, INFLIGHT_PER = 0.25, 4  # their running requests sampled every 0.25 s, shown per ~1 s
