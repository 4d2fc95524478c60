"""Optimization passes: pure functions `Graph -> PassResult`, registered by name."""

from teola.passes.pipeline import PassError, PassOptionError, enabled_passes, run_pipeline
from teola.passes.registry import get_pass, pass_names, register_pass, unregister_pass
from teola.passes.result import PassResult

__all__ = [
    "PassError",
    "PassOptionError",
    "PassResult",
    "get_pass",
    "pass_names",
    "enabled_passes",
    "register_pass",
    "run_pipeline",
    "unregister_pass",
]
