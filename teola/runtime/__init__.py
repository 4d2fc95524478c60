"""The two-tier runtime (Teola §5): graph scheduler per query, engine schedulers per engine."""
from teola.runtime.errors import QueryCancelled, QueryError, QueryTimeout, Result
from teola.runtime.executor import Executor, Instance
from teola.runtime.local_executor import LocalExecutor
from teola.runtime.metrics import Metrics
from teola.runtime.policies import make_policy, policy_names, register_policy
from teola.runtime.runtime import Runtime

__all__ = ["Executor", "Instance", "LocalExecutor", "Metrics", "QueryCancelled", "QueryError", "QueryTimeout",
           "Result", "Runtime", "make_policy", "policy_names", "register_policy"]
