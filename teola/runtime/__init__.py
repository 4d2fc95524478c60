"""The two-tier runtime (Teola §5): graph scheduler per query, engine schedulers per engine.

Everything outside this package uses these names only (a test walks the imports to keep it so):
`Runtime` (submit / submit_call / cancel / end_program / policy / engines() / health() / stats()),
its results and errors, the executor protocol, the batching-policy registry, and `llm_request` to
build a program call's request. `RayExecutor` loads on first use (it needs the `ray` extra)."""

from typing import Any

from teola.runtime.call_work import CallOutcome
from teola.runtime.engine_tier.work import Work
from teola.runtime.errors import (
    CallFailed,
    EngineDown,
    QueryCancelled,
    QueryError,
    QueryTimeout,
    QueryUnavailable,
)
from teola.runtime.executors.executor import Executor, Instance
from teola.runtime.executors.local import LocalExecutor
from teola.runtime.metrics import Metrics
from teola.runtime.requests import llm_request
from teola.runtime.result import Result
from teola.runtime.runtime import Runtime
from teola.scheduling.program.api_handling import HANDLINGS, choose_handling
from teola.scheduling.program.pause_handling import PauseCosts, choose_pause_handling
from teola.scheduling.registry import (
    DEFAULT_POLICY,
    ProgramQueues,
    make_policy,
    policy_factory,
    policy_names,
    register_policy,
)

__all__ = [
    "CallFailed",
    "CallOutcome",
    "DEFAULT_POLICY",
    "EngineDown",
    "HANDLINGS",
    "Executor",
    "Instance",
    "LocalExecutor",
    "Metrics",
    "PauseCosts",
    "ProgramQueues",
    "QueryCancelled",
    "QueryError",
    "QueryTimeout",
    "QueryUnavailable",
    "RayExecutor",
    "Result",
    "Runtime",
    "Work",
    "choose_handling",
    "choose_pause_handling",
    "llm_request",
    "make_policy",
    "policy_factory",
    "policy_names",
    "register_policy",
]


def __getattr__(name: str) -> Any:
    if name == "RayExecutor":
        from teola.runtime.executors.ray import RayExecutor

        return RayExecutor
    raise AttributeError(f"module 'teola.runtime' has no attribute {name!r}")
