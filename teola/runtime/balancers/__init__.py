"""Per-call load balancers for engines with several instances (Autellix §4.3): round-robin,
least-used, and the locality-aware balancer of Algorithm 2. See `locality.py`."""
from teola.runtime.balancers.locality import LeastUsed, LocalityAware, RoundRobin, balancer_names, make_balancer

__all__ = ["LeastUsed", "LocalityAware", "RoundRobin", "balancer_names", "make_balancer"]
