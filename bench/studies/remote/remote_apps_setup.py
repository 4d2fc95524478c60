"""The systems, apps and settings of the remote-services study (bench/studies/remote/remote_apps.py; the
deployment study shares the tool agent's prompt): the systems compared and teola's variants, the rates,
the tool agent's tools, instruction and worked examples, its questions, and a run's Settings."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from bench.lib.remote_services import TOOL_ARGS
from bench.lib.workloads import tool_queries
from bench.studies.rag.rag_setup import SYSTEMS as RAG_SYSTEMS

SYSTEMS = ("teola", "LlamaIndex", "LangGraph")
# --systems may also name the Teola paper's baselines (bench.studies.rag.rag_setup.PAPER_BASELINES), run on
# teola's runtime over the same engines, and teola with one default pass off (its effect measured on and off
# in one run: the row's "speedup" is that variant's latency / teola's)
VARIANTS: dict[str, tuple[dict[str, Any], str]] = {
    "teola-no-speculative-call": ({"passes": {"speculative_call": False}}, "topology"),
}
RUNTIME_SYSTEMS = {**RAG_SYSTEMS, **VARIANTS}  # systems that run on teola's runtime
APPS = ("search_generation", "tool_agent")
# Queries per second. Alone, a query takes a few seconds (two LLM calls of <=96 tokens + ~1 s of
# remote latency); vLLM batches concurrent decodes, so saturation is well above 1 / latency.
RATES = {"search_generation": (0.5, 1.0, 2.0, 4.0, 8.0), "tool_agent": (0.5, 1.0, 2.0, 4.0, 8.0)}
QUICK_RATE = {"search_generation": 1.0, "tool_agent": 1.0}
QUERY_TIMEOUT = 300.0
TOOL_NAMES = tuple(TOOL_ARGS)
# SmolLM2-135M writes tool calls only after worked examples, and only for some tools. Measured on 8
# one-tool questions (bench.lib.workloads.tool_queries) at greedy decoding: with the instruction alone, or
# with one-call examples, it answers in prose; with the two-call examples below and a "Question: "
# label it writes a correct first call line for every weather and unit-conversion question, names a
# tool "math" for arithmetic, answers encyclopedia questions in prose, and its second lines name
# tools that do not exist. So the agent makes one call per question and the questions ask for a
# city's weather or a unit conversion (the two tool kinds, ~0.25 s and ~0.03 s median latency).
PLAN_INSTRUCTION = (
    "You call tools. Tools: calculator(expression), convert_units(value, from_unit, to_unit), weather(city), "
    "wiki_lookup(query). Reply with one JSON object per line and nothing else. Examples:"
)
PLAN_EXAMPLES = (
    "Question: What is 3 times 4, and what is the weather in Rome?\n"
    '{"tool": "calculator", "args": {"expression": "3*4"}}\n{"tool": "weather", "args": {"city": "Rome"}}\n\n'
    "Question: Convert 5 km to mi, and who or what is the Nile?\n"
    '{"tool": "convert_units", "args": {"value": 5, "from_unit": "km", "to_unit": "mi"}}\n'
    '{"tool": "wiki_lookup", "args": {"query": "Nile"}}'
)
MAX_CALLS = 1
TOOL_KINDS = ("weather", "convert_units")


def agent_queries(n: int, seed: int) -> list[dict[str, Any]]:
    """The tool agent's questions, labelled as in PLAN_EXAMPLES."""
    return [{**q, "question": "Question: " + q["question"]} for q in tool_queries(n, seed, 1, TOOL_KINDS)]


@dataclass
class Settings:
    apps: tuple[str, ...] = APPS
    systems: tuple[str, ...] = SYSTEMS
    rates: dict[str, tuple[float, ...]] = field(default_factory=lambda: dict(RATES))
    n_queries: int = 20
    trials: int = 3
    alone: int = 5
    seed: int = 0
    latency_scale: float = 1.0
    # teola's runtime: batches vLLM may run at once (None: the runtime's default); remote search
    # requests per batch (None: the adapter's default)
    max_inflight: int | None = None
    search_max_batch: int | None = None

    @classmethod
    def quick(cls) -> Settings:
        return cls(rates={a: (r,) for a, r in QUICK_RATE.items()}, n_queries=4, trials=1, alone=1)
