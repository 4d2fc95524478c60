"""The Ray executor: every engine instance is a Ray actor (on any node of a Ray cluster) holding
one engine adapter. Schedulers stay in the driver; batches of plain-data requests go to the actors
and results come back through Ray's object store, except intermediate outputs only other actors
read, which stay there with the "refs" data path (teola.runtime.executors.ray_data).

Fault handling: an actor that dies, alone or with its node, fails the batches it was running (so
only the queries with primitives on it fail, with an error naming the instance); Ray restarts it
(`max_restarts`, default 1), on a live node with the resources it asks for if its node is gone, and
the restarted actor starts its adapter again, so later queries succeed. An actor Ray will not restart
(its restarts used up) is replaced by a new one with the same options. Batches are not retried
(`max_task_retries=0`): engine calls are not idempotent.

The workers' environment is an allow-list, and secrets reach only the actors that need them, by
actor call (teola.runtime.executors.ray_env)."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engines.protocol import Capability, EngineProfile, StreamEvent
from teola.ir.engine_spec import Engine
from teola.runtime.errors import EngineDown
from teola.runtime.executors.executor import Instance
from teola.runtime.executors.ray_actor import EngineActor, SecretsMissing
from teola.runtime.executors.ray_data import KEEP, MIN_REF_BYTES, attach_refs
from teola.runtime.executors.ray_env import (
    check_forward_env,
    check_secret_env,
    secrets_for,
    split_options,
    worker_env,
)

ACTOR_OPTIONS = (
    "num_cpus",
    "num_gpus",
    "memory",
    "resources",
    "scheduling_strategy",
    "max_restarts",
    "runtime_env",
    "max_concurrency",
)


DATA_PATHS = ("refs", "driver")
PING_TIMEOUT = 5.0  # seconds a ping of a restarting actor may take: one Ray cannot place yet never answers


@dataclass(slots=True)
class ActorPlan:
    """What creating an instance's actor takes, kept to create it again: Ray actor options,
    constructor arguments (no secrets) and the secrets sent with `acquire`."""

    options: dict[str, Any]
    args: tuple[Any, ...]
    secrets: dict[str, Any] | None


class RayExecutor:
    """Launches engine instances as Ray actors.

    address: a running cluster ("auto", "ray://host:10001", "host:6379"); None starts a local
    one (with `num_cpus` CPUs if given). namespace: the Ray namespace for the actors.
    init_options: more `ray.init` keywords. Per engine, `Engine(..., resources={...})` gives the
    actor options (num_cpus, num_gpus, memory, custom resources for placement, max_restarts).
    A backend object given to the runtime is shipped to the actor (it must be picklable).

    data_path: how intermediate outputs travel between primitives. "driver" (default): every
    result comes back to the driver, which puts it into the consumer's requests (what the
    in-process executor does; on one machine it measured faster, bench/results/overheads/ray.md). "refs": an
    output read only by primitives on engine actors (embedding vectors feeding ingestion and search) stays
    in Ray's object store (a return value of the producing task, owned by the driver, never fetched
    by it); the consumer's actor fetches the value from the producer's node. Outputs the driver reads itself
    (texts, search hits, scores, token counts, query outputs) always come back. min_ref_bytes:
    with "refs", a batch's results stay remote only from this estimated size on (default 100 KiB,
    Ray's inline limit; smaller ones ride in the actor's reply, which is cheaper); 0: always.

    share_actors (default true): runtimes in one Ray namespace that declare the same engine (name,
    kind, options, actor options, instance index) use one named actor, as `share_engines` gives apps
    in one process one adapter: a server with four apps on Ray starts the LLM once. The actor counts
    its holders and stops its adapter with the last one. An engine given a backend object is never
    shared.

    forward_env: more variable names to copy from the driver's environment into the job's
    runtime_env, beside the allow-list (teola.runtime.executors.ray_env.FORWARD_NAMES); Ray stores
    it, so a secret-looking name is refused. secret_env: {engine kind or name: [variable names]}
    sent to that engine's actors only, by actor call, beside the built-in ones (`TEOLA_PG_DSN` for
    pgvector and text search, `HF_TOKEN` for the Hugging Face engines).

    Different engines' actors are launched at once (`parallel_launch`): each loads in its own process."""

    parallel_launch = True

    def __init__(
        self,
        address: str | None = None,
        namespace: str = "teola",
        num_cpus: int | None = None,
        init_options: dict[str, Any] | None = None,
        data_path: str = "driver",
        min_ref_bytes: int = MIN_REF_BYTES,
        share_actors: bool = True,
        forward_env: list[str] | tuple[str, ...] = (),
        secret_env: dict[str, list[str]] | None = None,
    ) -> None:
        if data_path not in DATA_PATHS:
            raise ValueError(f"RayExecutor: data_path must be one of {list(DATA_PATHS)}, got {data_path!r}")
        if not isinstance(min_ref_bytes, int) or isinstance(min_ref_bytes, bool) or min_ref_bytes < 0:
            raise ValueError(f"RayExecutor: min_ref_bytes must be an int >= 0, got {min_ref_bytes!r}")
        if not isinstance(share_actors, bool):
            raise ValueError(f"RayExecutor: share_actors must be true or false, got {share_actors!r}")
        self.data_path = data_path
        self.min_ref_bytes = min_ref_bytes
        self.share_actors = share_actors
        self.forward_env = check_forward_env(forward_env)
        self.secret_env = check_secret_env(secret_env or {})
        self.address = address
        self.namespace = namespace
        self.num_cpus = num_cpus
        self.init_options = dict(init_options or {})
        self._owns_ray = False
        self._plans: dict[int, ActorPlan] = {}
        self._down: set[int] = set()  # instances whose actor died: wait for its restart before use
        self._reviving: dict[int, asyncio.Task] = {}
        self.restart_timeout = 300.0
        self.placements: dict[str, dict[str, Any]] = {}

    def runtime_env(self) -> dict[str, Any]:
        """The job's runtime_env: the allowed variables of the driver's environment (no secret)
        and a PYTHONPATH that finds teola and the working directory's apps."""
        env = worker_env(os.environ, self.forward_env)
        paths = [os.getcwd(), str(Path(__file__).resolve().parents[3])]
        env["PYTHONPATH"] = os.pathsep.join(paths + [os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)
        return {"env_vars": env}

    def _init(self) -> Any:
        import ray

        if not ray.is_initialized():
            kw: dict[str, Any] = {
                "namespace": self.namespace,
                "include_dashboard": False,
                "log_to_driver": True,
                **self.init_options,
            }
            if self.address:
                kw["address"] = self.address
            elif self.num_cpus is not None:
                kw["num_cpus"] = self.num_cpus
            kw.setdefault("runtime_env", self.runtime_env())
            ray.init(**kw)
            self._owns_ray = True
        return ray

    async def launch(self, spec: Engine, index: int, backend: Any | None) -> Instance:
        self._init()
        unknown = sorted(set(spec.resources) - set(ACTOR_OPTIONS))
        if unknown:
            raise ValueError(
                f"engine {spec.name!r}: unknown Ray resource option(s) {unknown}; "
                f"options: {list(ACTOR_OPTIONS)}"
            )
        opts = {
            "num_cpus": 0,
            "max_restarts": 1,
            "max_task_retries": 0,
            "max_concurrency": 64,
            **spec.resources,
        }
        if self.share_actors and backend is None:
            opts.update(name=shared_actor_name(spec, index), get_if_exists=True)
        public, credentials = split_options(spec.instance_options(index))
        secrets = secrets_for(spec.name, spec.kind, os.environ, self.secret_env, credentials)
        sealed = bool(secrets["env"] or secrets["options"])
        plan = ActorPlan(opts, (spec.name, spec.kind, public, backend, sealed), secrets if sealed else None)
        handle = self._create(plan)
        info = await handle.acquire.remote(plan.secrets)
        p = info["profile"]
        profile = (
            EngineProfile(**p)
            if p
            else EngineProfile(
                max_batch=spec.max_batch,
                max_efficient_batch=spec.max_efficient_batch,
                token_budget=spec.token_budget,
            )
        )
        inst = Instance(engine=spec.name, index=index, handle=handle, profile=profile)
        self._plans[id(inst)] = plan
        self._record(inst, info)
        return inst

    def _create(self, plan: ActorPlan) -> Any:
        import ray

        return ray.remote(EngineActor).options(**plan.options).remote(*plan.args)

    def _record(self, instance: Instance, info: dict[str, Any]) -> None:
        """Where the instance's actor runs and what its adapter offers, from `acquire`'s answer."""
        self.placements[instance.name] = {"pid": info["pid"], "node_id": info["node_id"]}
        instance.capabilities = frozenset(Capability(m) for m in info["methods"])

    async def execute(self, instance: Instance, op: str, requests: list[dict[str, Any]]) -> list[Any]:
        await self._wait_up(instance)
        if self.data_path == "refs" and any(r.get(KEEP) for r in requests):
            head, data = instance.handle.execute_split.options(num_returns=2).remote(
                op, requests, self.min_ref_bytes
            )
            return attach_refs(await self._guard(instance, head), data, instance.name)
        return await self._guard(instance, instance.handle.execute.remote(op, requests))

    async def stream(
        self, instance: Instance, op: str, requests: list[dict[str, Any]]
    ) -> AsyncIterator[tuple[int, StreamEvent, Any]]:
        if Capability.STREAM not in instance.capabilities:
            raise TypeError(
                f"engine {instance.engine!r} cannot stream (its adapter has no stream()); "
                "turn decode pipelining off for it with {'passes': {'decode_pipelining': False}}"
            )
        await self._wait_up(instance)
        gen = instance.handle.stream.remote(op, requests)
        async for ref in gen:
            yield await self._guard(instance, ref)

    async def call(self, instance: Instance, method: Capability, *args: Any) -> Any:
        await self._wait_up(instance)
        return await self._guard(instance, instance.handle.call.remote(method, *args))

    async def restart(self, instance: Instance) -> None:
        await self._wait_up(instance)
        await self._guard(instance, instance.handle.restart.remote())

    async def where(self, instance: Instance) -> dict[str, Any]:
        """The process id and Ray node id of the actor (after a restart, the new ones)."""
        return await instance.handle.where.remote()

    async def shutdown(self, instance: Instance) -> None:
        """Release the actor; the last runtime holding it stops its adapter and kills it."""
        import ray

        reviving = self._reviving.pop(id(instance), None)
        if reviving is not None:
            reviving.cancel()
        try:
            left = await instance.handle.release.remote()
        except ray.exceptions.RayActorError:
            left = 0  # already dead: nothing to stop
        if left == 0:
            ray.kill(instance.handle, no_restart=True)
        self._plans.pop(id(instance), None)

    async def _guard(self, instance: Instance, ref: Any) -> Any:
        import ray

        try:
            return await ref
        except ray.exceptions.RayActorError as e:
            self._down.add(id(instance))
            raise EngineDown(
                f"engine instance {instance.name} (Ray actor) died: {type(e).__name__}; "
                "it is restarted, on a live node if its node is gone, for later queries"
            ) from e
        except ray.exceptions.RayTaskError as e:
            if isinstance(e.cause, SecretsMissing):  # Ray restarted it while the driver was not looking
                self._down.add(id(instance))
                raise EngineDown(
                    f"engine instance {instance.name} (Ray actor) was restarted by Ray; "
                    "it gets its secrets again before new work"
                ) from None
            raise e.as_instanceof_cause() from None

    async def _wait_up(self, instance: Instance) -> None:
        """After a crash, hold new batches until the actor is back (a ping answers) and acquired
        again (its secrets sent, its adapter started, its new place recorded), so the queries that
        come after a failure succeed instead of hitting the restarting actor. Callers waiting at
        once share one revival."""
        if id(instance) not in self._down:
            return
        task = self._reviving.get(id(instance))
        if task is None:
            task = self._reviving[id(instance)] = asyncio.ensure_future(self._revive(instance))
            task.add_done_callback(lambda _: self._reviving.pop(id(instance), None))
        await asyncio.shield(task)

    async def _revive(self, instance: Instance) -> None:
        import ray

        deadline = time.monotonic() + self.restart_timeout
        last = "no answer"
        while True:
            handle = instance.handle
            try:
                async with asyncio.timeout(PING_TIMEOUT):
                    await handle.where.remote()
                info = await handle.acquire.remote(self._plans[id(instance)].secrets)
                self._record(instance, info)
                self._down.discard(id(instance))
                return
            except ray.exceptions.ActorDiedError as e:
                last = f"{type(e).__name__}: {str(e).splitlines()[0]}"
                self._replace(instance, handle)
            except (ray.exceptions.RayActorError, TimeoutError) as e:
                last = type(e).__name__
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"engine instance {instance.name} (Ray actor) did not come back within "
                    f"{self.restart_timeout:.0f} s after it died ({last}); no live node may have "
                    f"the resources it asks for: {self._plans[id(instance)].options}"
                ) from None
            await asyncio.sleep(0.2)

    def _replace(self, instance: Instance, dead: Any) -> None:
        """A new actor, with the same options, for an instance whose actor Ray will not restart (its
        restarts used up): Ray places it on a live node with the resources it asks for."""
        import ray

        ray.kill(dead, no_restart=True)  # should Ray be restarting it after all, it stays down
        instance.handle = self._create(self._plans[id(instance)])

    def close(self) -> None:
        """Disconnect from Ray if this executor started the connection."""
        if self._owns_ray:
            import ray

            ray.shutdown()
            self._owns_ray = False


def shared_actor_name(spec: Engine, index: int) -> str:
    """The Ray name of the actor every runtime declaring this engine instance shares."""
    key = json.dumps(
        [spec.name, spec.kind, spec.options, spec.resources, index], sort_keys=True, default=repr
    )
    return f"teola-{spec.name}-{index}-{hashlib.sha256(key.encode()).hexdigest()[:16]}"
