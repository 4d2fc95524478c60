"""Batching policies by name: `make_policy("topology")`. Every built-in policy is listed in
`_POLICIES` below; add your own with `register_policy`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from teola.scheduling.base import Decision, Filler, Limits, Pending, Pick, Policy, RequestQueue, check_policy
from teola.scheduling.primitive.fifo import FifoPolicy
from teola.scheduling.primitive.per_invocation import PerInvocationPolicy
from teola.scheduling.primitive.throughput import ThroughputPolicy
from teola.scheduling.primitive.topology import TopologyPolicy
from teola.scheduling.program.atlas import ATLASPolicy
from teola.scheduling.program.fcfs import FCFSPolicy
from teola.scheduling.program.lamps import LAMPSPolicy
from teola.scheduling.program.mlfq import MLFQPolicy
from teola.scheduling.program.plas import PLASPolicy
from teola.scheduling.program.policy import ProgramPolicy
from teola.scheduling.program.queues import ProgramQueues
from teola.scheduling.program.sjf import SJFPolicy

_POLICIES: dict[str, Callable[..., Policy]] = {
    "fifo": FifoPolicy,
    "po": PerInvocationPolicy,
    "to": ThroughputPolicy,
    "topology": TopologyPolicy,
    "mlfq": MLFQPolicy,
    "plas": PLASPolicy,
    "atlas": ATLASPolicy,
    "lamps": LAMPSPolicy,
    "sjf": SJFPolicy,
    "fcfs": FCFSPolicy,
}

DEFAULT_POLICY = "topology"


def register_policy(name: str, factory: Callable[..., Policy]) -> None:
    """Make `{"policy": name}` build `factory(**options)`."""
    if not isinstance(name, str) or not name or not callable(factory):
        raise ValueError(
            "register_policy(name, factory): name must be a non-empty string and factory callable"
        )
    _POLICIES[name] = factory


def unregister_policy(name: str) -> None:
    _POLICIES.pop(name, None)


def policy_names() -> list[str]:
    return sorted(_POLICIES)


def policy_factory(name: str) -> Callable[..., Policy]:
    """The class (or factory) registered as `name`; unknown names raise ValueError."""
    if name not in _POLICIES:
        raise ValueError(f"unknown batching policy {name!r}; known policies: {', '.join(policy_names())}")
    return _POLICIES[name]


def make_policy(name: str, **options: Any) -> Policy:
    """Build the policy registered as `name` with its options. Unknown names raise ValueError."""
    return check_policy(policy_factory(name)(**options), name)


__all__ = [
    "ATLASPolicy",
    "DEFAULT_POLICY",
    "Decision",
    "FifoPolicy",
    "Filler",
    "LAMPSPolicy",
    "Limits",
    "MLFQPolicy",
    "PLASPolicy",
    "Pending",
    "PerInvocationPolicy",
    "Pick",
    "Policy",
    "ProgramPolicy",
    "ProgramQueues",
    "RequestQueue",
    "SJFPolicy",
    "ThroughputPolicy",
    "TopologyPolicy",
    "make_policy",
    "policy_factory",
    "policy_names",
    "register_policy",
    "unregister_policy",
]
