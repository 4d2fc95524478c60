"""The rows the runtime appends to a query's trace (`teola.runtime.trace_row.TraceRow`) serialize as
they always have: the JSON of real traces (advanced RAG on the deterministic simulated engines; a
template agent that pauses for a tool, on a scripted LLM) is compared key by key with a stored copy
(tests/golden/trace_rows.json). Times and batch ids depend on the machine's load, so for those the
row keeps only what kind of JSON value they are; every other value is compared as it is."""

from __future__ import annotations

import json
import pathlib

from engines.sim.sim_engine import sim_engines
from tests.unit.compile.test_agent_component import CALL, agent_app
from tests.unit.runtime.test_runtime import QUERY, make_rag

GOLDEN = pathlib.Path(__file__).parents[2] / "golden" / "trace_rows.json"
BY_KIND = ("queued", "started", "finished", "instance", "batch_id", "batch_size", "batches")


def kind(v: object) -> str:
    return "null" if v is None else type(v).__name__


def shape(trace: list) -> list[dict]:
    """Each row's JSON text read back, with the load-dependent values replaced by their kind."""
    rows = json.loads(json.dumps(trace))
    return sorted(
        ({k: kind(v) if k in BY_KIND else v for k, v in row.items()} for row in rows),
        key=lambda r: r["primitive"],
    )


async def traces() -> dict[str, list[dict]]:
    app = make_rag(sim_engines())
    try:
        rag = await app.run(QUERY)
    finally:
        await app.stop()
    agent, _ = agent_app([CALL, "17 times 23 is 391."], handling="auto")
    try:
        tool = await agent.run({"question": "What is 17 times 23?"})
    finally:
        await agent.stop()
    return {"advanced_rag": shape(rag.trace), "agent": shape(tool.trace)}


async def test_trace_rows_serialize_as_the_stored_copy():
    got, stored = await traces(), json.loads(GOLDEN.read_text())
    assert got == stored
    assert {k: [list(r) for r in rows] for k, rows in got.items()} == {  # the keys in the same order too
        k: [list(r) for r in rows] for k, rows in stored.items()
    }
