"""The product's layer table: for each package of teola/ and engines/, its layer, what it holds and
the packages it may import. tests/unit/test_layering.py checks every import against it, package by
package, and docs/architecture.md's layer table is generated from it:

    .venv/bin/python -m tests.support.layers      # rewrite the table in docs/architecture.md

A package is a dotted module name with everything under it (`teola.compile` holds
`teola.compile.components.agent`), plus the extra top-level modules it lists in `modules`; the two
roots (`teola`, `engines`) hold only their `__init__`. An entry of `may_import` names a package, or a
prefix of several (`engines.*` = every package of engines/ but its root). A module in no package, an import
the table does not declare, and a declaration no import uses all fail the test: adding an import
between packages means adding it here, in the same commit."""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "architecture.md"
BEGIN = "<!-- layer table: generated from tests/support/layers.py by `python -m tests.support.layers` -->"
END = "<!-- end of the layer table -->"


@dataclass(frozen=True)
class Package:
    name: str
    layer: int
    what: str
    may_import: tuple[str, ...] = ()
    modules: tuple[str, ...] = ()  # top-level modules beside `name` that belong to this package
    tree: bool = True  # False for the roots: only the `__init__` itself

    def holds(self, module: str) -> bool:
        for m in (self.name, *self.modules):
            if module == m or (self.tree and module.startswith(m + ".")):
                return True
        return False

    def allows(self, other: str) -> bool:
        return any(matches(decl, other) for decl in self.may_import)


def matches(decl: str, package: str) -> bool:
    """A declaration names one package, or every package under a prefix (`engines.*`)."""
    if decl.endswith(".*"):
        return package.startswith(decl[:-1])
    return package == decl


# Layers from the bottom: 0 engines, 1 the core, 2 the runtime, 3 the public API, 4 server, simulator
# and planning, 5 the command line. A package imports only from its own layer or lower ones.
_E = "engines"
PACKAGES: tuple[Package, ...] = (
    Package(
        "teola.cli",
        5,
        "the `teola` command (`cli.py`) and its subcommands' helpers (`cli_*.py`)",
        (
            "engines.*",
            "teola.client",
            "teola.emulate",
            "teola.loaders",
            "teola.plan",
            "teola.runtime",
            "teola.server",
            "teola.sim",
            "teola.trace",
        ),
        modules=(
            "teola.cli_apps",
            "teola.cli_documents",
            "teola.cli_ingest",
            "teola.cli_ingest_files",
            "teola.cli_logging",
            "teola.cli_machine",
            "teola.cli_remote",
        ),
    ),
    Package(
        "teola.plan",
        4,
        "SamuLLM planning on top of the simulator and the runtime",
        ("engines.*", "teola.balancers", "teola.ir", "teola.runtime", "teola.server", "teola.sim"),
    ),
    Package(
        "teola.sim",
        4,
        "the simulator: a virtual-time event loop driving the real runtime, profiles "
        "measured on real engines, the multi-replica model, `teola simulate` / `teola profile`; its "
        "simulated engines are `engines/sim/`",
        ("engines.*", "teola.api", "teola.compile", "teola.server", "teola.trace"),
    ),
    Package(
        "teola.server",
        4,
        "FastAPI app: `api.py` (routes), `queries.py` (one HTTP query), `errors.py` "
        "(JSON errors, body limit), `state.py`, `store/` (what tenants keep: uploaded documents and the "
        "namespace registry, in PostgreSQL or memory, and their endpoints), `metrics.py`, `loading.py` "
        "(apps by name), `ui.py` + `static/` (the /ui page), `recent.py`, `openai/` (the "
        "OpenAI-compatible door: one program call per request through `Runtime.submit_call`), "
        "`tracing.py` (a caller's W3C traceparent)",
        (
            "engines.*",
            "teola",
            "teola.api",
            "teola.compile",
            "teola.ir",
            "teola.loaders",
            "teola.runtime",
            "teola.telemetry",
            "teola.trace",
        ),
    ),
    Package(
        "teola",
        3,
        "the package's `__init__`: re-exports the public API",
        tree=False,
        may_import=("teola.api", "teola.compile", "teola.ir", "teola.passes"),
    ),
    Package(
        "teola.api",
        3,
        "the public API: `App` (template, compile, run), `Program` (client sessions, "
        "calls that pause for tools), engines shared by apps",
        ("engines.*", "teola.compile", "teola.ir", "teola.runtime", "teola.telemetry"),
    ),
    Package(
        "teola.runtime",
        2,
        "the two-tier runtime, reached only through `teola.runtime`'s names: "
        "`runtime.py` (the front door), `graph_tier/` (one `QueryRun` per query: release, object "
        "store, speculation, warm-ups), `engine_tier/` (one scheduler per engine: queue + policy -> "
        "batch, streaming, preemption, supervision), `executors/` (in process, Ray actors), "
        "`requests.py` (what each primitive sends), `outputs.py` (what it writes back), "
        "`namespaces.py` + `staging.py` (queries' vector-store namespaces)",
        ("engines.*", "teola.balancers", "teola.compile", "teola.ir", "teola.scheduling"),
    ),
    Package(
        "teola.compile",
        1,
        "template -> p-graph: `compiler.py` (the cache of optimized graphs), "
        "`decompose.py` (Algorithm 1), `components/` (one decomposer per component kind; the agent's "
        "writes the tool-call syntax of `tool_syntax.py`, which the runtime and the OpenAI door parse), "
        "`chunking.py`, `template.py`, `config_schema.py`",
        ("engines.*", "teola.ir", "teola.passes"),
    ),
    Package(
        "teola.passes",
        1,
        "one optimization pass per file, their registry, options and the pipeline runner",
        ("engines.*", "teola.ir"),
    ),
    Package(
        "teola.telemetry",
        1,
        "OpenTelemetry spans and metrics (imported only when on); GenAI attributes by op family",
        ("engines.*", "teola.ir", "teola.trace"),
    ),
    Package(
        "teola.ir",
        1,
        "the graph IR: `graph.py` (`Graph`, `lint()`, text / dot / mermaid), "
        "`primitive.py`, `ops.py` (the op enum and families), `refs.py`, `node.py` + `rshift.py` "
        "(`Node`, `>>`), `engine_spec.py` (`Engine`, which checks its balancer's name), `generation.py`",
        ("engines.*", "teola.balancers"),
    ),
    Package(
        "teola.balancers",
        1,
        "instance balancers (round robin, least loaded, locality-aware, which "
        "pins a program to an instance through the process table)",
        ("teola.scheduling",),
    ),
    Package(
        "teola.scheduling",
        1,
        "every scheduling decision as pure logic behind the `Policy` protocol "
        "(`base.py`): `primitive/` (Teola's batching policies: fifo, per-invocation, throughput, "
        "topology), `program/` (program-level: ATLAS / PLAS / MLFQ, LAMPS / SJF / FCFS, their queues, "
        "pause handling, length prediction), `process_table.py` (per-program service, read by the "
        "balancers), `preemption.py` (which calls are preemptible, admission slots, what a preempted "
        "request has left), `registry.py` (policies by name)",
        ("engines.*",),
    ),
    Package(
        "teola.emulate",
        1,
        "an emulated GPU vLLM server timed by `engines/sim/` (`teola emulate`)",
        ("engines.*",),
    ),
    Package("teola.trace", 1, "a finished query's timeline, critical path and text forms"),
    Package("teola.loaders", 1, "the text of an uploaded file (PDF, HTML, Markdown, DOCX, plain text)"),
    Package("teola.client", 1, "a Python client of a teola server's HTTP API (over httpx)"),
    Package(
        "engines.tuning",
        0,
        "settings chosen for this machine, above the adapters they configure: "
        "`settings.py` (engine settings for the hardware found at start, or those measured), `tune.py` "
        "(`teola tune`: settings chosen by measurement), `setup_cli.py` (`teola setup`, `teola doctor`, "
        "`teola tune`: models prepared, the stack checked)",
        (f"{_E}.assets", f"{_E}.machine", f"{_E}.sentence_transformers", f"{_E}.vllm"),
    ),
    Package(
        "engines.registry", 0, "engine kinds by name -> adapter factories", (f"{_E}.protocol", f"{_E}.sim")
    ),
    Package(
        "engines.vllm",
        0,
        "vLLM in process (AsyncLLM), options, KV swap",
        (f"{_E}.assets", f"{_E}.kvswap", f"{_E}.llm_text", f"{_E}.machine", f"{_E}.protocol"),
    ),
    Package(
        "engines.openai",
        0,
        "LLM and embedding servers behind OpenAI-compatible HTTP APIs",
        (f"{_E}.assets", f"{_E}.llm_text", f"{_E}.protocol"),
    ),
    Package(
        "engines.sentence_transformers",
        0,
        "embedder and reranker",
        (f"{_E}.assets", f"{_E}.machine", f"{_E}.protocol"),
    ),
    Package(
        "engines.tools",
        0,
        "tool engines (local functions, HTTP tools, search as a tool)",
        (f"{_E}.http_retry", f"{_E}.protocol", f"{_E}.search"),
    ),
    Package(
        "engines.search",
        0,
        "text search (BM25 over a local corpus, pgvector) and remote search APIs",
        (f"{_E}.assets", f"{_E}.http_retry", f"{_E}.machine", f"{_E}.postgres", f"{_E}.protocol"),
    ),
    Package(
        "engines.postgres",
        0,
        "embedded PostgreSQL server, pools, the pgvector store",
        (f"{_E}.assets", f"{_E}.machine", f"{_E}.protocol"),
    ),
    Package(
        "engines.sim",
        0,
        "simulated engines (cost models) and the deterministic test engine",
        (f"{_E}.kvswap", f"{_E}.llm_text", f"{_E}.machine", f"{_E}.protocol"),
    ),
    Package(
        "engines.llm_text",
        0,
        "prompt rendering, whole conversations with tools, output parsing shared by every LLM adapter",
        (f"{_E}.protocol",),
    ),
    Package("engines.http_retry", 0, "retries of 429 / 5xx answers for engines that call HTTP APIs"),
    Package("engines.kvswap", 0, "the batched KV-block swap kernel's binding"),
    Package(
        "engines.assets",
        0,
        "what engines load, prepared from pip packages: models (`models.py`), "
        "data sets (`corpora.py`), the cache's paths (`paths.py`)",
    ),
    Package(
        "engines.machine",
        0,
        "the machine: its cores and accelerators (`hardware.py`), the rule of "
        "core lending between engines (`core_lending.py`, `core_share.py`), the knee of a latency "
        "curve (`knee.py`), the op costs a non-LLM engine measures at start (`op_costs.py`)",
        (f"{_E}.llm_text",),
    ),
    Package(
        "engines.protocol",
        0,
        "the engine boundary, at the root of engines/ and imported by both "
        "sides: the `Engine` protocol, the payload of each stream event kind (`stream_events.py`), "
        "the op names and typed requests of each op (`requests.py`) and their checks",
        modules=(f"{_E}.stream_events", f"{_E}.requests", f"{_E}.request_checks"),
    ),
    Package("engines", 0, "the package's `__init__`", tree=False),
)


def package_of(module: str) -> Package | None:
    for pkg in PACKAGES:
        if pkg.holds(module):
            return pkg
    return None


def _cell(names: tuple[str, ...]) -> str:
    return ", ".join(f"`{n}`" for n in names) if names else "nothing of teola or engines"


def _folder(pkg: Package) -> str:
    mods = (pkg.name, *pkg.modules)
    return ", ".join(f"`{m}`" for m in mods)


def table() -> str:
    """The markdown table of PACKAGES, top layer first (the order of the declaration)."""
    rows = ["| layer | package | what | may import |", "|---|---|---|---|"]
    for pkg in sorted(PACKAGES, key=lambda p: -p.layer):
        rows.append(f"| {pkg.layer} | {_folder(pkg)} | {pkg.what} | {_cell(pkg.may_import)} |")
    return "\n".join(rows)


def section() -> str:
    return f"{BEGIN}\n{table()}\n{END}"


def doc_with_table(text: str) -> str:
    pattern = re.compile(re.escape(BEGIN) + r".*?" + re.escape(END), re.S)
    if not pattern.search(text):
        raise ValueError(
            f"{DOC} has no generated layer table: put the two marker lines\n{BEGIN}\n{END}\n"
            "where the table goes, then run `python -m tests.support.layers`"
        )
    return pattern.sub(lambda _: section(), text, count=1)


def main() -> int:
    old = DOC.read_text(encoding="utf-8")
    new = doc_with_table(old)
    if new != old:
        DOC.write_text(new, encoding="utf-8")
        print(f"rewrote the layer table in {DOC.relative_to(ROOT)}")
    else:
        print(f"{DOC.relative_to(ROOT)}: the layer table is up to date")
    return 0


if __name__ == "__main__":
    sys.exit(main())
