"""Jobs of an app's queries (`"app": "app_queries"`): N queries of a teola app (a shipped `apps/` app
by name, or `module:attr`, as `teola serve` takes them), planned like the other job kinds.

A query's LLM work is read from its compiled e-graph: every LLM call (a decoding primitive, after
its prefills) on the LLM engine that runs it, the earlier calls of the query it reads from, and the
non-LLM primitives on the way (embedding, ingestion, search, reranking, tools). Their sizes come
from running the query once, alone, through teola's runtime on the simulated engines of a profile
(`steps_profile`, every engine of the app simulated, virtual time, milliseconds a query): each
call's prompt tokens, prefix-cached tokens and max_tokens, and each non-LLM primitive's seconds, the
profile's cost of that query's batch. A call's `delay` is the longest path of non-LLM seconds from
the calls it reads from (or the query's start) to it: a stated fixed cost per query, without the
queueing of many queries' embeddings and searches on their engines, which the plan does not
schedule (it places the LLM engines only). Output lengths are not recorded (the simulated engines'
texts are placeholders): they are sampled as for the other job kinds, by (model, stage) with the
call's component as its stage (e.g. "synthesis"). `samples` queries are recorded (default 8, at
most N) and query i takes recording i mod samples.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from engines.requests import DECODE_OPS, LLM_OPS

KIND = "app_queries"
PROGRAM_KIND = "program_runs"  # N runs of a Program (teola.plan.program_job), planned the same way


@dataclass(slots=True)
class Call:
    """One LLM call of a recorded query."""

    engine: str
    component: str
    prompt: int
    cached: int
    max_tokens: int
    deps: tuple[int, ...]  # earlier calls of the query (indices) whose output it reads
    delay: float  # seconds of non-LLM steps between those calls (or the query's start) and it


def load_app(target: str) -> Any:
    """The App a job's `target` names (a shipped app's name or module:attr)."""
    from teola.server.loading import AppNotFound, resolve_app

    try:
        return resolve_app(target)
    except AppNotFound as e:
        raise ValueError(f"job target: {e}") from None


def app_queries(app: Any, spec: dict[str, Any], n: int) -> list[dict[str, Any]]:
    """n queries: variants of the job's `query` (default: the app's sample query), each its own question."""
    from teola.sim.run import query_variants

    base = spec.get("query") or app.sample()[0]
    return query_variants(base, n)


def record(spec: dict[str, Any], profile: str | None) -> list[list[Call]]:
    """The LLM calls of `samples` queries of the job's app (see the module docstring)."""
    from teola.sim.virtual_loop import run_virtual

    app, samples = simulated_app(spec, profile)
    queries = app_queries(app, spec, samples)
    return run_virtual(_record(app, queries, dict(spec.get("config") or {})))


def simulated_app(spec: dict[str, Any], profile: str | None) -> tuple[Any, int]:
    """The job's app with every engine simulated from `steps_profile` (default: `profile`), and how
    many queries (runs) to record."""
    from teola.sim.run import use_profile

    steps = spec.get("steps_profile") or profile
    if steps is None:
        raise ValueError(
            f"an {spec['app']} job needs 'steps_profile' (the simulation profile of its app's "
            "engines) or --profile"
        )
    app = load_app(spec["target"])
    use_profile(app, steps)
    return app, max(1, min(int(spec.get("samples", 8)), count(spec)))


def count(spec: dict[str, Any]) -> int:
    """How many queries (app_queries) or program runs (program_runs) the job has."""
    return int(spec["runs"] if spec["app"] == PROGRAM_KIND else spec["queries"])


async def _record(app: Any, queries: list[dict[str, Any]], config: dict[str, Any]) -> list[list[Call]]:
    out = []
    try:
        for q in queries:  # one at a time: each query's steps cost what they cost alone
            compiled = app.compile(q, config)
            result = await app.execute(compiled, config)
            out.append(calls_of(compiled.egraph, result.trace))
    finally:
        await app.stop()
    return out


def calls_of(graph: Any, trace: list[dict[str, Any]]) -> list[Call]:
    """A query's LLM calls from its e-graph and the trace of one run of it: a call is a decoding
    primitive whose trace entry carries token counts; its deps are the calls reachable backwards
    through non-call primitives; its delay the longest path of non-LLM seconds on the way."""
    rows = {row["primitive"]: row for row in trace}
    calls: list[Call] = []
    index: dict[int, int] = {}  # decoding primitive id -> call index
    ups: dict[int, set[int]] = {}  # primitive id -> nearest calls it reads from
    off: dict[int, float] = {}  # primitive id -> non-LLM seconds since those calls, before it
    for p in _topological(graph):
        up: set[int] = set()
        wait = 0.0
        for q in graph.parents(p.id):
            if q.id in index:
                up.add(index[q.id])
            else:
                up |= ups[q.id]
                wait = max(wait, off[q.id] + (0.0 if q.op in LLM_OPS else _seconds(rows.get(q.name))))
        ups[p.id], off[p.id] = up, wait
        row = rows.get(p.name) or {}
        if p.op in DECODE_OPS and "num_output_tokens" in row:
            prompt = int(row.get("num_prompt_tokens") or 1)
            index[p.id] = len(calls)
            calls.append(
                Call(
                    p.engine,
                    p.component,
                    prompt,
                    min(int(row.get("num_cached_tokens") or 0), prompt - 1),
                    _max_tokens(p, row),
                    tuple(sorted(up)),
                    wait,
                )
            )
    return calls


def _topological(graph: Any) -> list[Any]:
    import networkx as nx

    return [graph[i] for i in nx.topological_sort(graph.nx)]


def _seconds(row: dict[str, Any] | None) -> float:
    if not row or row.get("started") is None or row.get("finished") is None:
        return 0.0
    return max(0.0, float(row["finished"]) - float(row["started"]))


def _max_tokens(p: Any, row: dict[str, Any]) -> int:
    """The call's output limit: its decoding primitive's max_tokens (the tokens it decoded when unset)."""
    return int(p.args.get("max_tokens") or row.get("num_output_tokens") or 1)
