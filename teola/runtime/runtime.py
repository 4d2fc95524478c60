"""The two-tier runtime: a graph scheduler per query (upper tier) over one engine scheduler per
engine (lower tier), engine instances behind an executor, and runtime-wide metrics.

`Runtime` is the only door into this package for the rest of teola: `submit` runs a compiled
query, `submit_call` one LLM call of a client program, `cancel` / `end_program` end them, and
`policy`, `engines()`, `health()`, `stats()` describe what runs. It reads time only from its event
loop (`loop.time()`), so a virtual-time loop drives it unchanged."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from engines.protocol import Feature
from teola.compile.compiler import Compiled
from teola.ir.engine_spec import Engine
from teola.ir.ops import LLM_OPS
from teola.runtime.call_work import CallOutcome, CallWork, call_entry
from teola.runtime.engine_tier.engine_scheduler import EngineScheduler
from teola.runtime.engine_tier.supervisor import Supervisor
from teola.runtime.engine_tier.tenant_shares import check_weights
from teola.runtime.errors import QueryCancelled, QueryError
from teola.runtime.executors.executor import Executor, Instance
from teola.runtime.graph_tier.dispatch_plan import DispatchPlanCache
from teola.runtime.graph_tier.graph_scheduler import QueryRun
from teola.runtime.graph_tier.query_context import QueryContext
from teola.runtime.health import engine_health
from teola.runtime.launch import launch_instances
from teola.runtime.metrics import Metrics
from teola.runtime.namespaces import Namespaces
from teola.runtime.options import backoff_option, check_options, interval_option, make_executor, query_timeout
from teola.runtime.result import Result
from teola.scheduling.program.pause_handling import PauseCosts
from teola.scheduling.registry import DEFAULT_POLICY, Pending, make_policy, policy_names

log = logging.getLogger("teola.runtime")


class Runtime:
    """Runs compiled queries on engines.

    engines: the app's engine specs by name. backends: already-built adapters by engine name (one
    object for all instances, or a list with one per instance); engines without one are built with
    `engines.registry.create_engine`. Options:
      executor: where instances run: "local" (default, in process), "ray" (each instance a Ray actor;
        `ray` holds RayExecutor options, e.g. {"address": "auto", "data_path": "refs"}), or an Executor;
      policy: batching policy for engines whose spec sets none ("topology", "fifo", "po", "to", ...);
      policy_options: {policy name: {option: value}} (e.g. {"fifo": {"timeout": 0.01}});
      max_inflight: batches an instance may run at once, an int or {engine: int} (default: the adapter's
        profile's: 64 for remote search and tools, max_num_seqs for vLLM and remote LLM servers; other
        backends of continuously batching kinds max_batch; else 1);
      prescheduling: fuse a prefill into its only decode on the same engine (default True; a query
        may override it with config {"prescheduling": false});
      health_interval: seconds between health probes of every engine instance (default 5; 0 or
        None: probe only after a failed batch). An instance found down is restarted in place
        (teola.runtime.engine_tier.supervisor) and its in-flight queries fail with `QueryUnavailable`;
      restart_backoff: (first, max) seconds between restart attempts of a down instance (1, 30);
      pause_costs: what LLM calls that pause for tools with handling "auto" weigh when the engine's
        policy has no costs of its own (teola.scheduling.program.pause_handling.PauseCosts;
        default its defaults);
      length_predictor: request -> predicted output tokens, kept as the `predicted_tokens` of LLM
        requests' dispatch records that have none (what `lamps` and `sjf` rank by; e.g. a
        teola.scheduling.program.length_predictor over embeddings);
      tenant_shares: {tenant: weight} for fair queuing between tenants on every engine (unlisted
        tenants weigh 1; teola.runtime.engine_tier.tenant_shares). A query's tenant is its config
        "tenant" (the server sets it from the API key), a program call's the `tenant` of `submit_call`.

    Per-query config read by `run`: "timeout" (seconds for the whole query), "primitive_timeout"
    (seconds for any one primitive from dispatch to finish), "priority" (int passed to LLM engines,
    lower first), "prescheduling", "namespace" (a given namespace is kept after the query; the
    query's documents appear in it whole when it succeeds, or not at all: teola.runtime.staging),
    "return_values" (object-store keys whose values `Result.values` returns, e.g. ["rerank.context"]),
    "cache_salt" (a string the LLM engines mix into their prefix-cache keys, so queries with other
    salts, e.g. other tenants, never hit this query's cached prompts), "tenant" (who the query is
    for: engines queue tenants fairly, see tenant_shares),
    and "policy" (switches the runtime-wide policy of engines without their own).
    """

    def __init__(
        self, engines: dict[str, Engine], backends: dict[str, Any] | None = None, **options: Any
    ) -> None:
        check_options(engines, backends or {}, options)
        self.specs = dict(engines)
        self.backends = dict(backends or {})
        self.executor: Executor = make_executor(options.get("executor"), options.get("ray"))
        self.policy_options: dict[str, dict[str, Any]] = dict(options.get("policy_options") or {})
        self.policy_name = options.get("policy") or DEFAULT_POLICY
        self.max_inflight = options.get("max_inflight")
        self.prescheduling = bool(options.get("prescheduling", True))
        self.health_interval = interval_option(options.get("health_interval", 5.0))
        self.restart_backoff = backoff_option(options.get("restart_backoff", (1.0, 30.0)))
        self.pause_costs = PauseCosts.from_option(options.get("pause_costs"))
        self.length_predictor = options.get("length_predictor")
        self.tenant_shares = check_weights(options.get("tenant_shares") or {})
        self.supervisor: Supervisor | None = None
        self.metrics = Metrics(queue_lengths=self.queue_lengths)
        self.schedulers: dict[str, EngineScheduler] = {}
        self.instances: dict[str, list[Instance]] = {}
        self.plans = DispatchPlanCache()
        self._ctx: QueryContext | None = None
        self._runs: dict[str, QueryRun] = {}
        self._cleanups: set[asyncio.Task] = set()
        self.namespaces = Namespaces(self.executor, self.instances, self.metrics, self._cleanups)
        self._started = False

    # ---- life cycle -----------------------------------------------------------------------------
    async def start(self) -> None:
        """Start every engine instance and its scheduler."""
        if self._started:
            return
        try:
            self.supervisor = Supervisor(
                self.executor,
                self.instances,
                self.metrics,
                lambda eng: self.schedulers[eng].kick(),
                self.health_interval,
                self.restart_backoff,
            )
            await launch_instances(
                self.executor, self.specs, self.backends, self.max_inflight, self.instances
            )
            for name, spec in self.specs.items():
                policy_name = spec.policy or self.policy_name
                policy = make_policy(policy_name, **self.policy_options.get(policy_name, {}))
                llm = bool(spec.ops) and spec.ops <= LLM_OPS
                self.schedulers[name] = EngineScheduler(
                    spec,
                    self.instances[name],
                    executor=self.executor,
                    policy=policy,
                    metrics=self.metrics,
                    llm=llm,
                    tenant_shares=self.tenant_shares,
                    pause_costs=self.pause_costs,
                    length_predictor=self.length_predictor,
                    supervisor=self.supervisor,
                )
            self.supervisor.start()
        except BaseException:
            await self._shutdown_instances()
            raise
        self._ctx = QueryContext(
            submit=self._submit_entry,
            withdraw=self._withdraw_entry,
            llm_engines=frozenset(n for n, s in self.schedulers.items() if s.llm),
            metrics=self.metrics,
            prescheduling=self.prescheduling,
            ended=self._query_ended,
            cleanup=self.namespaces.spawn_cleanup,
            tool_done=self._tool_done,
            remote_data=getattr(self.executor, "data_path", None) == "refs",
        )
        self._started = True

    async def stop(self) -> None:
        """Fail the queries still running, stop the schedulers and the engine instances."""
        for run in list(self._runs.values()):
            run.fail(QueryError(f"query {run.qid}: the runtime stopped", run.qid))
        if self.supervisor is not None:
            await self.supervisor.close()
        for s in self.schedulers.values():
            await s.close()
        if self._cleanups:
            await asyncio.gather(*list(self._cleanups), return_exceptions=True)
        await self._shutdown_instances()
        self.schedulers.clear()
        self._started = False
        close = getattr(self.executor, "close", None)
        if close is not None:
            close()

    async def _shutdown_instances(self) -> None:
        errors = []
        for insts in self.instances.values():
            for inst in insts:
                try:
                    await self.executor.shutdown(inst)
                except Exception as e:  # keep stopping the others, then report
                    errors.append(f"{inst.name}: {type(e).__name__}: {e}")
        self.instances.clear()
        if errors:
            raise RuntimeError("some engine instances failed to stop: " + "; ".join(errors))

    # ---- what runs -------------------------------------------------------------------------------
    @property
    def policy(self) -> str:
        """The batching policy of engines that have none of their own."""
        return self.policy_name

    def engines(self) -> dict[str, Engine]:
        """The engine specs this runtime runs, by name."""
        return dict(self.specs)

    def features(self, engine: str) -> frozenset[Feature]:
        """What every started instance of `engine` declares it can do (engines.protocol.Feature)."""
        return frozenset.intersection(
            *[i.profile.features for i in self.instances.get(engine, [])] or [frozenset()]
        )

    def health(self) -> dict[str, dict[str, Any]]:
        """Per engine: started, healthy (every instance up), its instances' names, the ones down
        (being restarted) with why, queued entries, batches in flight, the batches its instances
        may run at once (capacity) and restarts so far."""
        return engine_health(self.specs, self.schedulers, self.instances, self.supervisor)

    def stats(self) -> dict[str, Any]:
        """The runtime's counters as a dict (`Metrics.snapshot()`): queries, primitives, latencies,
        batch sizes per engine, prefix-cache hits, queue lengths."""
        return self.metrics.snapshot()

    # ---- policies -------------------------------------------------------------------------------
    def set_tenant_shares(self, weights: dict[str, float]) -> None:
        """Replace the tenants' fair-queuing weights on every engine (option tenant_shares)."""
        self.tenant_shares = check_weights(weights)
        for sched in self.schedulers.values():
            sched.shares.weights = dict(self.tenant_shares)

    def set_policy(self, name: str) -> None:
        """Switch the batching policy of every engine that has no policy of its own."""
        if name == self.policy_name:
            return
        if not isinstance(name, str):
            raise TypeError(f"config['policy'] must be a policy name, one of {policy_names()}")
        for eng, sched in self.schedulers.items():
            if self.specs[eng].policy is None:
                sched.policy = make_policy(name, **self.policy_options.get(name, {}))
                sched.kick()
        make_policy(name, **self.policy_options.get(name, {}))
        self.policy_name = name

    # ---- queries --------------------------------------------------------------------------------
    async def submit(
        self,
        compiled: Compiled,
        config: dict[str, Any] | None = None,
        on_event: Callable[[dict[str, Any]], None] | None = None,
    ) -> Result:
        """Execute one compiled query; returns its `Result` or raises `QueryError` (or a subclass:
        `QueryCancelled`, `QueryTimeout`). Many queries may run at once.

        `on_event`, if given, is called on the event loop with each progress event of this query:
        ``{"event": "primitive", "status": "started" | "finished", "primitive", "op", "engine",
        "instance", "batch_size", "t"}`` (t: seconds since the query started) when an engine
        primitive is batched and when it finishes, and ``{"event": "token", "primitive", "text"}``
        for each piece of the answer's text as the LLM decodes it (the decodes whose text is the
        output; an answer taken from a fallback branch arrives only in the result)."""
        if not self._started:
            raise RuntimeError("Runtime.run before Runtime.start(); await runtime.start() first")
        config = dict(config or {})
        timeout = query_timeout(config)
        if config.get("policy") is not None:
            self.set_policy(config["policy"])
        plan = self.plans.get(compiled.egraph)
        for p in plan.prims:
            if p.engine is not None and p.engine not in self.schedulers:
                raise ValueError(
                    f"primitive {p.name!r} needs engine {p.engine!r}, which this runtime does not run; "
                    f"engines: {sorted(self.schedulers)}"
                )
        qid = compiled.query_id
        if qid in self._runs:
            raise ValueError(f"query {qid} is already running; compile the query again for a new id")
        run = QueryRun(self._ctx, compiled, config, plan, on_event)
        self.namespaces.stage(run, config)
        self._runs[qid] = run
        self.metrics.queries += 1
        try:
            run.start(timeout)
            try:
                result = await run.future
            except asyncio.CancelledError:
                run.abort()
                raise
            if run.staging is not None:
                await self.namespaces.publish(run)
            elif run.needs_cleanup:
                await self.namespaces.cleanup(run)
            return result
        finally:
            del self._runs[qid]

    run = submit  # the name App and earlier code use

    async def submit_call(
        self,
        engine: str,
        request: dict[str, Any],
        *,
        program: str,
        call_id: str,
        parents: list[str] | tuple[str, ...] | None = None,
        on_delta: Callable[[str], None] | None = None,
        tenant: str = "",
        **hints: Any,
    ) -> CallOutcome:
        """Run one LLM call of a client program (teola.api.program.Program) on `engine`'s scheduler,
        tagged with the program id so program-aware policies see all its calls as one program.
        `request` is an LLM request (`requests.llm_request`); `parents`: ids of earlier calls of
        the program it depends on (None = unknown, [] = a root call); `on_delta` receives the text
        as it decodes when the request asks for it ("stream_text"); `tenant`: whose program it is
        (fair queuing between tenants, see tenant_shares). `hints` go into the call's dispatch record
        (`call_work.CALL_HINTS`: abort_key, predicted_tokens, pause_kv, resumes_preserved); the
        outcome's `pause_kv` is the handling applied. Cancelling the awaiting task withdraws the call
        if it is still queued. Raises CallFailed if the engine fails it."""
        if not self._started:
            raise RuntimeError("Runtime.submit_call: the runtime is not started; await runtime.start() first")
        sched = self.schedulers.get(engine)
        if sched is None:
            raise ValueError(f"no engine {engine!r}; engines: {sorted(self.schedulers)}")
        loop = asyncio.get_running_loop()
        work = CallWork(future=loop.create_future(), call_id=call_id, on_delta=on_delta)
        entry = call_entry(
            request,
            program=program,
            call_id=call_id,
            parents=parents,
            tenant=tenant,
            work=work,
            now=loop.time(),
            hints=hints,
        )
        sched.submit(entry)
        try:
            outcome = await work.future
        except asyncio.CancelledError:
            sched.remove(entry)
            raise
        return dataclasses.replace(outcome, pause_kv=entry.records[0].pause_kv)

    def end_program(self, program: str) -> None:
        """Program `program` ended: policies and balancers forget it (its process-table entry, its
        instance pin)."""
        for sched in self.schedulers.values():
            sched.end_program(program)

    def cancel(self, query_id: str) -> bool:
        """Cancel a running query: its queued primitives are dropped and `run` raises
        `QueryCancelled`. Returns False if no such query is running."""
        run = self._runs.get(query_id)
        if run is None or run.dead:
            return False
        run.fail(QueryCancelled(f"query {query_id} was cancelled", query_id))
        return True

    async def wait_idle(self) -> None:
        """Wait for background work (namespace clean-ups of failed queries) and for every batch
        still on an engine to finish."""
        while True:
            pending = list(self._cleanups) + [t for s in self.schedulers.values() for t in s.tasks()]
            if not pending:
                return
            await asyncio.gather(*pending, return_exceptions=True)

    def running(self) -> list[str]:
        """Ids of the queries in flight."""
        return list(self._runs)

    def _submit_entry(self, engine: str, entry: Pending) -> None:
        self.schedulers[engine].submit(entry)

    def _withdraw_entry(self, engine: str, entry: Pending) -> bool:
        return self.schedulers[engine].remove(entry)

    def _tool_done(
        self, args: dict[str, Any], requests: Sequence[Mapping[str, Any]], trace: Mapping[str, Any]
    ) -> None:
        """A tool primitive finished. A template "agent" round's (args "api_of": its LLM engine)
        tool calls each took the tool batch's time, which that engine's policy learns API durations
        from (`Policy.observe_api`)."""
        sched = self.schedulers.get(args.get("api_of") or "")
        if sched is None or trace.get("started") is None:
            return
        for req in requests:
            if isinstance(req.get("tool"), str):
                sched.policy.observe_api(req["tool"], trace["finished"] - trace["started"])

    def _query_ended(self, run: QueryRun, err: QueryError | None, latency: float) -> None:
        self.metrics.query_ended(err, latency)
        if err is not None:  # stop what still runs for it on the engines (vLLM aborts its requests)
            for sched in self.schedulers.values():
                sched.abort(run.qid)
        self.end_program(run.qid)  # program-aware policies and balancers forget the query

    def queue_lengths(self) -> dict[str, int]:
        return {name: s.queued() for name, s in self.schedulers.items()}

    async def drop_namespace(self, namespace: str) -> int:
        """Delete a kept namespace (config "namespace") from every engine instance that stores
        namespaces (vector stores); returns how many instances were asked."""
        if not isinstance(namespace, str) or not namespace:
            raise ValueError(f"namespace must be a non-empty string, got {namespace!r}")
        return await self.namespaces.drop(namespace)
