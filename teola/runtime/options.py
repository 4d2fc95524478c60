"""Runtime options that need more than a type check: `Runtime`'s arguments as a whole, the executor,
the health-probe interval and the restart backoff, and a query's config (each raising an error that
names the option)."""

from __future__ import annotations

import numbers
from typing import Any

from teola.ir.engine_spec import Engine
from teola.runtime.executors.executor import Executor, Instance
from teola.runtime.executors.local import LocalExecutor
from teola.scheduling.registry import DEFAULT_POLICY, make_policy

OPTIONS = (
    "executor",
    "ray",
    "policy",
    "policy_options",
    "max_inflight",
    "prescheduling",
    "health_interval",
    "restart_backoff",
    "pause_costs",
    "length_predictor",
    "tenant_shares",
)


def check_options(engines: dict[str, Any], backends: dict[str, Any], options: dict[str, Any]) -> None:
    """Check `Runtime`'s arguments before anything is built: option names, the engine specs, a backend
    for each registered engine only, every policy named (with its policy_options), max_inflight's type
    and length_predictor's; the options built from their values are checked where they are built."""
    unknown = sorted(set(options) - set(OPTIONS))
    if unknown:
        raise TypeError(f"Runtime: unknown option(s) {unknown}; options are {list(OPTIONS)}")
    for name, spec in engines.items():
        if not isinstance(spec, Engine):
            raise TypeError(f"Runtime: engines[{name!r}] must be an Engine, got {spec!r}")
    for name in backends:
        if name not in engines:
            raise ValueError(
                f"Runtime: a backend is given for {name!r}, which is not a registered engine; "
                f"engines: {sorted(engines)}"
            )
    policy_options = dict(options.get("policy_options") or {})
    for policy in (options.get("policy") or DEFAULT_POLICY, *(s.policy for s in engines.values())):
        if policy is not None:
            make_policy(policy, **policy_options.get(policy, {}))
    mi = options.get("max_inflight")
    if mi is not None and not isinstance(mi, (int, dict)):
        raise TypeError(f"Runtime: max_inflight must be an int or a dict engine -> int, got {mi!r}")
    predictor = options.get("length_predictor")
    if predictor is not None and not callable(predictor):
        raise TypeError(f"Runtime: length_predictor must be callable (request -> tokens), got {predictor!r}")


def make_executor(executor: Any, ray_options: dict[str, Any] | None) -> Executor:
    if executor is None or executor == "local":
        return LocalExecutor()
    if executor == "ray":
        from teola.runtime.executors.ray import RayExecutor

        if ray_options is not None and not isinstance(ray_options, dict):
            raise TypeError(
                f"Runtime: ray options must be a dict (e.g. {{'address': 'auto'}}), got {ray_options!r}"
            )
        return RayExecutor(**(ray_options or {}))
    if isinstance(executor, str):
        raise ValueError(f"Runtime: unknown executor {executor!r}; use 'local' or 'ray'")
    return executor


def interval_option(value: Any) -> float | None:
    if value is None or value == 0:
        return None
    if not isinstance(value, (int, float)) or isinstance(value, bool) or value < 0:
        raise ValueError(
            f"Runtime: health_interval must be seconds >= 0 (0 or None: no periodic probe), got {value!r}"
        )
    return float(value)


def backoff_option(value: Any) -> tuple[float, float]:
    if (
        not isinstance(value, (list, tuple))
        or len(value) != 2
        or not all(isinstance(b, (int, float)) and not isinstance(b, bool) and b > 0 for b in value)
        or value[0] > value[1]
    ):
        raise ValueError(
            f"Runtime: restart_backoff must be (first, max) seconds with 0 < first <= max, got {value!r}"
        )
    return float(value[0]), float(value[1])


def query_timeout(config: dict[str, Any]) -> float | None:
    """Check a query's config (`Runtime.submit`); returns its "timeout" in seconds (None: none)."""
    timeout = _seconds(config, "timeout")
    _seconds(config, "primitive_timeout")
    salt = config.get("cache_salt")
    if salt is not None and (not isinstance(salt, str) or not salt):
        raise TypeError(f"config['cache_salt'] must be a non-empty string, got {salt!r}")
    tenant = config.get("tenant")
    if tenant is not None and not isinstance(tenant, str):
        raise TypeError(f"config['tenant'] must be a string (who the query is for), got {tenant!r}")
    keep = config.get("return_values")
    if keep is not None and not (isinstance(keep, (list, tuple)) and all(isinstance(k, str) for k in keep)):
        raise TypeError(f"config['return_values'] must be a list of object-store keys, got {keep!r}")
    prio = config.get("priority", 0)
    if not isinstance(prio, int) or isinstance(prio, bool):
        raise TypeError(f"config['priority'] must be an int (lower runs first), got {prio!r}")
    return timeout


def _seconds(config: dict[str, Any], key: str) -> float | None:
    v = config.get(key)
    if v is None:
        return None
    if not isinstance(v, numbers.Real) or isinstance(v, bool) or v <= 0:
        raise ValueError(f"config[{key!r}] must be a number of seconds > 0, got {v!r}")
    return float(v)


def inflight_for(max_inflight: Any, spec: Engine, inst: Instance) -> int:
    """How many batches `inst` of `spec` may run at once: the runtime's `max_inflight` (one number, or
    per engine name), else the instance's own profile (its batch size when the engine batches
    continuously; one otherwise)."""
    if isinstance(max_inflight, int):
        return max(1, max_inflight)
    if isinstance(max_inflight, dict) and spec.name in max_inflight:
        return max(1, int(max_inflight[spec.name]))
    own, continuous = inst.profile.max_inflight, spec.continuous
    return own if own > 0 else max(1, inst.profile.max_batch) if continuous else 1
