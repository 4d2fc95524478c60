"""The Ray executor: every engine instance is a Ray actor (on any node of a Ray cluster) holding
one engine adapter. Schedulers stay in the driver; batches of plain-data requests go to the actors
and results come back through Ray's object store, except intermediate outputs only other actors
read, which stay there with the "refs" data path (teola.runtime.executors.ray_data).

Fault handling: an actor that dies fails the batches it was running (so only the queries with
primitives on it fail, with an error naming the instance); Ray restarts it (`max_restarts`,
default 1) and the restarted actor starts its adapter again on first use, so later queries
succeed. Batches are not retried (`max_task_retries=0`): engine calls are not idempotent."""
from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import json
import os
import time
from pathlib import Path
from typing import Any, AsyncIterator

from engines.protocol import EngineProfile, restart_adapter
from teola.ir.engine_spec import Engine
from teola.runtime.errors import EngineDown
from teola.runtime.executors.executor import Instance
from teola.runtime.executors.ray_data import KEEP, MIN_REF_BYTES, attach_refs, resolve_inputs, split_results

ACTOR_OPTIONS = ("num_cpus", "num_gpus", "memory", "resources", "scheduling_strategy", "max_restarts",
                 "runtime_env", "max_concurrency")


DATA_PATHS = ("refs", "driver")


class EngineActor:
    """Runs inside the actor process; wrapped with `ray.remote` at launch. The adapter is built and
    started lazily, so a restarted actor comes back on its own. `holders` counts the runtimes using
    it (`acquire` / `release`): an actor shared by several apps stops its adapter with the last."""

    def __init__(self, name: str, kind: str, options: dict[str, Any], backend: Any = None) -> None:
        self.name = name
        self.kind = kind
        self.options = options
        self.backend = backend
        self.started = False
        self.holders = 0
        self._starting = asyncio.Lock()

    async def _ready(self) -> Any:
        if not self.started:
            async with self._starting:  # runtimes sharing the actor may ask at once
                if not self.started:
                    if self.backend is None:
                        from engines.registry import create_engine
                        self.backend = create_engine(self.name, self.kind, dict(self.options))
                    await self.backend.start()
                    self.started = True
        return self.backend

    async def acquire(self) -> dict[str, Any]:
        """One more runtime uses this actor: its adapter is started; what `start` tells."""
        info = await self.start()
        self.holders += 1
        return info

    async def release(self) -> int:
        """A runtime is done with this actor: the adapter stops with the last one. The holders left."""
        self.holders = max(0, self.holders - 1)
        if self.holders == 0:
            await self.stop()
        return self.holders

    async def start(self) -> dict[str, Any]:
        backend = await self._ready()
        import ray
        profile = getattr(backend, "profile", None)
        # the whole profile crosses, so a remote instance is scheduled as a local one would be
        # (context window, max_inflight included)
        return {"pid": os.getpid(), "node_id": ray.get_runtime_context().get_node_id(),
                "profile": dataclasses.asdict(profile) if isinstance(profile, EngineProfile) else None,
                "methods": [m for m in ("stream", "drop_namespace", "publish_namespace", "health", "abort")
                            if callable(getattr(backend, m, None))]}

    async def restart(self) -> None:
        """Stop the adapter (errors of a dead one ignored) and start it again in this actor."""
        if self.backend is None or not self.started:
            await self._ready()
            return
        await restart_adapter(self.backend)

    async def execute(self, op: str, requests: list[dict[str, Any]]) -> list[Any]:
        """Run a batch, with the refs among the requests' fields resolved (teola.runtime.executors.ray_data)."""
        return await (await self._ready()).execute(op, await resolve_inputs(requests))

    async def execute_split(self, op: str, requests: list[dict[str, Any]], min_ref_bytes: int):
        """`execute` with two return values: the results to send back and those of requests marked
        to stay in the object store (teola.runtime.executors.ray_data.split_results)."""
        return split_results(requests, await self.execute(op, requests), min_ref_bytes)

    async def stream(self, op: str, requests: list[dict[str, Any]]):
        async for event in (await self._ready()).stream(op, await resolve_inputs(requests)):
            yield event

    async def call(self, method: str, *args: Any) -> Any:
        result = getattr(await self._ready(), method)(*args)
        if hasattr(result, "__await__"):
            result = await result
        return result

    async def stop(self) -> None:
        if self.started:
            self.started = False
            await self.backend.stop()

    def where(self) -> dict[str, Any]:
        import ray
        return {"pid": os.getpid(), "node_id": ray.get_runtime_context().get_node_id()}


class RayExecutor:
    """Launches engine instances as Ray actors.

    address: a running cluster ("auto", "ray://host:10001", "host:6379"); None starts a local
    one (with `num_cpus` CPUs if given). namespace: the Ray namespace for the actors.
    init_options: more `ray.init` keywords. Per engine, `Engine(..., resources={...})` gives the
    actor options (num_cpus, num_gpus, memory, custom resources for placement, max_restarts).
    A backend object given to the runtime is shipped to the actor (it must be picklable).

    data_path: how intermediate outputs travel between primitives. "driver" (default): every
    result comes back to the driver, which puts it into the consumer's requests (what the
    in-process executor does; on one machine it measured faster, bench/results/ray.md). "refs": an
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
    shared."""

    def __init__(self, address: str | None = None, namespace: str = "teola", num_cpus: int | None = None,
                 init_options: dict[str, Any] | None = None, data_path: str = "driver",
                 min_ref_bytes: int = MIN_REF_BYTES, share_actors: bool = True) -> None:
        if data_path not in DATA_PATHS:
            raise ValueError(f"RayExecutor: data_path must be one of {list(DATA_PATHS)}, got {data_path!r}")
        if not isinstance(min_ref_bytes, int) or isinstance(min_ref_bytes, bool) or min_ref_bytes < 0:
            raise ValueError(f"RayExecutor: min_ref_bytes must be an int >= 0, got {min_ref_bytes!r}")
        if not isinstance(share_actors, bool):
            raise ValueError(f"RayExecutor: share_actors must be true or false, got {share_actors!r}")
        self.data_path = data_path
        self.min_ref_bytes = min_ref_bytes
        self.share_actors = share_actors
        self.address = address
        self.namespace = namespace
        self.num_cpus = num_cpus
        self.init_options = dict(init_options or {})
        self._owns_ray = False
        self._methods: dict[int, set[str]] = {}
        self._down: set[int] = set()  # instances whose actor died: wait for Ray's restart before use
        self.restart_timeout = 300.0
        self.placements: dict[str, dict[str, Any]] = {}

    def _init(self) -> Any:
        import ray
        if not ray.is_initialized():
            kw: dict[str, Any] = {"namespace": self.namespace, "include_dashboard": False,
                                  "log_to_driver": True, **self.init_options}
            if self.address:
                kw["address"] = self.address
            elif self.num_cpus is not None:
                kw["num_cpus"] = self.num_cpus
            # the driver's environment (cache dirs, offline flags, vLLM settings) goes to the workers
            env = {k: v for k, v in os.environ.items() if k.startswith(("TEOLA_", "VLLM_", "HF_", "TRANSFORMERS_"))}
            paths = [os.getcwd(), str(Path(__file__).resolve().parents[3])]
            env["PYTHONPATH"] = os.pathsep.join(paths + [os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)
            kw.setdefault("runtime_env", {"env_vars": env})
            ray.init(**kw)
            self._owns_ray = True
        return ray

    async def launch(self, spec: Engine, index: int, backend: Any | None) -> Instance:
        ray = self._init()
        unknown = sorted(set(spec.resources) - set(ACTOR_OPTIONS))
        if unknown:
            raise ValueError(f"engine {spec.name!r}: unknown Ray resource option(s) {unknown}; "
                             f"options: {list(ACTOR_OPTIONS)}")
        opts = {"num_cpus": 0, "max_restarts": 1, "max_task_retries": 0, "max_concurrency": 64,
                **spec.resources}
        if self.share_actors and backend is None:
            opts.update(name=shared_actor_name(spec, index), get_if_exists=True)
        actor_cls = ray.remote(EngineActor)
        handle = actor_cls.options(**opts).remote(spec.name, spec.kind, spec.instance_options(index), backend)
        info = await handle.acquire.remote()
        self.placements[f"{spec.name}/{index}"] = {"pid": info["pid"], "node_id": info["node_id"]}
        p = info["profile"]
        profile = EngineProfile(**p) if p else EngineProfile(max_batch=spec.max_batch,
                                                            max_efficient_batch=spec.max_efficient_batch,
                                                            token_budget=spec.token_budget)
        inst = Instance(spec.name, index, handle, profile)
        self._methods[id(inst)] = set(info["methods"])
        return inst

    async def execute(self, instance: Instance, op: str, requests: list[dict[str, Any]]) -> list[Any]:
        await self._wait_up(instance)
        if self.data_path == "refs" and any(r.get(KEEP) for r in requests):
            head, data = instance.handle.execute_split.options(num_returns=2).remote(op, requests, self.min_ref_bytes)
            return attach_refs(await self._guard(instance, head), data, instance.name)
        return await self._guard(instance, instance.handle.execute.remote(op, requests))

    async def stream(self, instance: Instance, op: str, requests: list[dict[str, Any]]) -> AsyncIterator[tuple[int, str, Any]]:
        if "stream" not in self._methods.get(id(instance), ()):
            raise TypeError(f"engine {instance.engine!r} cannot stream (its adapter has no stream()); "
                            "turn decode pipelining off for it with {'passes': {'decode_pipelining': False}}")
        await self._wait_up(instance)
        gen = instance.handle.stream.remote(op, requests)
        async for ref in gen:
            yield await self._guard(instance, ref)

    def supports(self, instance: Instance, method: str) -> bool:
        return method in self._methods.get(id(instance), ())

    async def call(self, instance: Instance, method: str, *args: Any) -> Any:
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
        try:
            left = await instance.handle.release.remote()
        except ray.exceptions.RayActorError:
            left = 0  # already dead: nothing to stop
        if left == 0:
            ray.kill(instance.handle, no_restart=True)
        self._methods.pop(id(instance), None)

    async def _guard(self, instance: Instance, ref: Any) -> Any:
        import ray
        try:
            return await ref
        except ray.exceptions.RayActorError as e:
            self._down.add(id(instance))
            raise EngineDown(f"engine instance {instance.name} (Ray actor) died: {type(e).__name__}; "
                             "Ray restarts it for later queries") from e
        except ray.exceptions.RayTaskError as e:
            raise e.as_instanceof_cause() from None

    async def _wait_up(self, instance: Instance) -> None:
        """After a crash, hold new batches until Ray has restarted the actor (a ping answers), so
        the queries that come after a failure succeed instead of hitting the restarting actor."""
        if id(instance) not in self._down:
            return
        import asyncio

        import ray
        deadline = time.monotonic() + self.restart_timeout
        while True:
            try:
                await instance.handle.where.remote()
                await instance.handle.acquire.remote()  # the restarted actor counts its holders afresh
                self._down.discard(id(instance))
                return
            except ray.exceptions.ActorDiedError as e:
                raise RuntimeError(f"engine instance {instance.name} (Ray actor) is dead and will not be "
                                   "restarted (max_restarts used up); restart the server") from e
            except ray.exceptions.RayActorError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"engine instance {instance.name} (Ray actor) did not come back within "
                                       f"{self.restart_timeout:.0f} s after a crash") from None
                await asyncio.sleep(0.2)

    def close(self) -> None:
        """Disconnect from Ray if this executor started the connection."""
        if self._owns_ray:
            import ray
            ray.shutdown()
            self._owns_ray = False


def shared_actor_name(spec: Engine, index: int) -> str:
    """The Ray name of the actor every runtime declaring this engine instance shares."""
    key = json.dumps([spec.name, spec.kind, spec.options, spec.resources, index], sort_keys=True, default=repr)
    return f"teola-{spec.name}-{index}-{hashlib.sha256(key.encode()).hexdigest()[:16]}"
