"""A job turned into what the planner schedules: per model, its requests with prompt length, sampled
output length and dependencies (the app's computation graph, SamuLLM section 3). A chain's
self-loop (chain summarisation) stays one model whose requests wait for their predecessor
(`after`), as the paper fuses self-loops into one node."""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field
from typing import Any

from engines.sim.text import count_tokens
from teola.plan import app_job, program_job, prompts
from teola.plan.app_job import Call, count
from teola.plan.cost import ModelCost
from teola.plan.data import chunks, documents, questions
from teola.plan.job import Job
from teola.plan.lengths import StageLengths, load_lengths


@dataclass(slots=True)
class Request:
    key: int
    stage: str
    inputs: dict[str, Any]
    prompt: int  # prompt tokens (upstream outputs counted at their sampled length)
    target: int  # sampled output tokens
    max_tokens: int
    deps: tuple[tuple[str, int], ...] = ()  # (model, key) whose outputs this request reads
    after: int | None = None  # predecessor on the same model (a chain)
    group: int = 0  # requests of a group stay on one replica
    cached: int = 0  # leading prompt tokens shared with the stage's other requests
    delay: float = 0.0  # seconds of non-LLM steps after its inputs exist (app queries)


@dataclass
class Workload:
    models: dict[str, ModelCost]
    requests: dict[str, list[Request]]
    upstream: dict[str, set[str]] = field(default_factory=dict)

    def total_requests(self) -> int:
        return sum(len(v) for v in self.requests.values())


class _Builder:
    def __init__(self, job: Job, profile: str | None, lengths: StageLengths | None) -> None:
        self.job = job
        self.profile = profile
        self.lengths = lengths or load_lengths(job.lengths, seed=job.seed)
        self.costs: dict[str, ModelCost] = {}
        for name, spec in job.models.items():
            chosen = spec.profile or profile
            if chosen is None:
                raise ValueError(f"model {name!r} has no 'profile' in the job and no --profile was given")
            self.costs[name] = ModelCost(chosen, spec.max_tokens)
        self.wl = Workload(dict(self.costs), {m: [] for m in job.models}, {m: set() for m in job.models})

    def add(
        self,
        model: str,
        stage: str,
        inputs: dict[str, Any],
        deps: tuple[tuple[str, int], ...] = (),
        after: int | None = None,
        group: int = 0,
    ) -> Request:
        reqs, spec, cost = self.wl.requests[model], self.job.models[model], self.costs[model]
        key = len(reqs)
        n_up = max(len(deps), 1 if after is not None else 0)
        text = prompts.build(stage, inputs, [""] * n_up)
        upstream = sum(self.wl.requests[m][k].target for m, k in deps)
        if after is not None:
            upstream += reqs[after].target
        prompt = cost.template_tokens + round(count_tokens(text) * cost.token_ratio) + upstream
        target = self.lengths.sample(model, spec.lengths or stage, f"{group}:{key}", spec.max_tokens)
        target = max(1, min(target, cost.max_model_len - prompt))
        shared = cost.template_tokens + round(
            count_tokens(prompts.shared_prefix(stage, n_up)) * cost.token_ratio
        )
        req = Request(
            key,
            stage,
            inputs,
            prompt,
            target,
            spec.max_tokens,
            deps,
            after,
            group,
            min(cost.cached_tokens(shared), prompt - 1),
        )
        return self._append(model, req)

    def add_call(
        self,
        model: str,
        call: Call,
        inputs: dict[str, Any],
        deps: tuple[tuple[str, int], ...],
        after: int | None,
        group: int,
    ) -> Request:
        """A recorded LLM call of an app query (teola.plan.app_job): its prompt as recorded."""
        spec, cost = self.job.models[model], self.costs[model]
        key = len(self.wl.requests[model])
        cap = min(spec.max_tokens, call.max_tokens)
        prompt = min(call.prompt, cost.max_model_len - 1)
        target = self.lengths.sample(model, spec.lengths or call.component, f"{group}:{key}", cap)
        target = max(1, min(target, cost.max_model_len - prompt))
        return self._append(
            model,
            Request(
                key,
                call.component,
                inputs,
                prompt,
                target,
                cap,
                deps,
                after,
                group,
                min(call.cached, prompt - 1),
                call.delay,
            ),
        )

    def _append(self, model: str, req: Request) -> Request:
        self.wl.requests[model].append(req)
        for m, _ in req.deps:
            self.wl.upstream[model].add(m)
        return req


def build_workload(job: Job, profile: str | None = None, lengths: StageLengths | None = None) -> Workload:
    """The job's requests per model (sampled output lengths; see the module docstring)."""
    b = _Builder(job, profile, lengths)
    for part in job.parts or [job]:
        _BUILD[part.app](b, part.spec)
    return b.wl


def _ensembling(b: _Builder, spec: dict[str, Any]) -> None:
    for i, q in enumerate(questions(spec.get("dataset", "truthfulqa"), spec["requests"])):
        answers = [b.add(m, "answer", q, group=i) for m in spec["answerers"]]
        if spec.get("fuser"):
            b.add(
                spec["fuser"],
                "fuse",
                q,
                tuple((m, r.key) for m, r in zip(spec["answerers"], answers)),
                group=i,
            )


def _routing(b: _Builder, spec: dict[str, Any]) -> None:
    routes = [(m, float(w)) for m, w in spec["routes"].items()]
    total = sum(w for _, w in routes)
    for i, q in enumerate(questions(spec.get("dataset", "truthfulqa"), spec["requests"])):
        u = (zlib.crc32(f"{spec.get('seed', 0)}:{i}".encode()) % 100_000) / 100_000 * total
        for m, w in routes:
            if u < w or m == routes[-1][0]:
                b.add(m, "route", q, group=i)
                break
            u -= w


def _chain_summary(b: _Builder, spec: dict[str, Any]) -> None:
    words, cap = int(spec.get("chunk_words", 300)), spec.get("max_chunks")
    for d, doc in enumerate(documents(spec.get("dataset", "multilexsum"), int(spec.get("documents", 100)))):
        prev = None
        for c in chunks(doc, words)[:cap]:
            prev = b.add(spec["summariser"], "summarise", {"chunk": c}, after=prev, group=d).key
        if spec.get("evaluator"):
            for k in range(int(spec.get("evaluations", 1))):
                b.add(spec["evaluator"], "evaluate", {"aspect": k}, ((spec["summariser"], prev),), group=d)


def _app_queries(b: _Builder, spec: dict[str, Any]) -> None:
    """Each query's (or program run's) recorded LLM calls (teola.plan.app_job, program_job): a call
    reading an earlier call of the same model waits for it on its replica (`after`, the latest such
    call); one reading another model's call depends on it (`deps`)."""
    recorded = (program_job if spec["app"] == app_job.PROGRAM_KIND else app_job).record(spec, b.profile)
    engines = {c.engine for q in recorded for c in q}
    missing, extra = sorted(engines - set(b.job.models)), sorted(set(b.job.models) - engines)
    if missing or extra:
        raise ValueError(
            f"{spec['app']} of {spec['target']!r}: the job's 'models' must be the LLM engines its calls "
            f"use, {sorted(engines)}"
            + (f"; missing {missing}" if missing else "")
            + (f"; not LLM engines of it: {extra}" if extra else "")
        )
    for i in range(count(spec)):
        calls = recorded[i % len(recorded)]
        made: list[Request] = []
        for c in calls:
            same = [made[d].key for d in c.deps if calls[d].engine == c.engine]
            deps = tuple((calls[d].engine, made[d].key) for d in c.deps if calls[d].engine != c.engine)
            made.append(b.add_call(c.engine, c, {"query": i}, deps, max(same) if same else None, i))


_BUILD = {
    "ensembling": _ensembling,
    "routing": _routing,
    "chain_summary": _chain_summary,
    "app_queries": _app_queries,
    "program_runs": _app_queries,
}
