"""Starting a runtime's engine instances: one engine's instances one after another, and different
engines at once where the executor runs each instance in its own process (`parallel_launch`: Ray
actors), so an app's LLM, embedder, reranker and store actors load side by side instead of in turn.
In process they start in turn: an in-process vLLM start sets the process's environment and CPU
affinity for the engine-core process it spawns, which another engine loading at that moment would
inherit."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from teola.ir.engine_spec import Engine
from teola.runtime.executors.executor import Executor, Instance
from teola.runtime.options import inflight_for


async def launch_instances(
    executor: Executor,
    specs: Mapping[str, Engine],
    backends: Mapping[str, Any],
    max_inflight: Any,
    into: dict[str, list[Instance]],
) -> None:
    """Launch every instance of `specs` into `into` (engine name -> its instances, in the specs'
    order). Instances are added as they start, so that after a failure the caller can stop exactly
    those that did; the first failure is raised once every launch has ended."""
    for name, spec in specs.items():
        given = backends.get(name)
        if isinstance(given, (list, tuple)) and len(given) != spec.instances:
            raise ValueError(f"engine {name!r}: {len(given)} backends given for {spec.instances} instances")
        into[name] = []

    async def one_engine(name: str, spec: Engine) -> None:
        given = backends.get(name)
        for i in range(spec.instances):
            backend = given[i] if isinstance(given, (list, tuple)) else given
            inst = await executor.launch(spec, i, backend)
            inst.max_inflight = inflight_for(max_inflight, spec, inst)
            into[name].append(inst)

    if not getattr(executor, "parallel_launch", False):
        for name, spec in specs.items():
            await one_engine(name, spec)
        return
    outcomes = await asyncio.gather(*(one_engine(n, s) for n, s in specs.items()), return_exceptions=True)
    errors = [o for o in outcomes if isinstance(o, BaseException)]
    if errors:
        raise errors[0]
