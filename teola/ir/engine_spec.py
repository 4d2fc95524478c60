"""`Engine`: how an app declares an engine it uses (the adapter is built at start-up)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from engines.llm_text.costs import EngineCosts
from engines.machine.op_costs import OpCost
from engines.protocol import EngineProfile
from engines.registry import engine_kinds, kind_continuous, kind_defaults, kind_ranks_by
from engines.tuning.settings import machine_max_efficient_batch
from teola.balancers import DEFAULT_BALANCER, balancer_names, make_balancer
from teola.ir.graph import EngineInfo
from teola.ir.ops import PrimOp

ADMISSIONS = ("capacity", "efficient_batch")


class Engine:
    """An engine registration: `Engine("llm", kind="vllm", model="smollm2-135m-instruct")`.

    name: how nodes refer to it. kind: the adapter ("vllm", "sentence_transformers", "reranker",
    "pgvector", "search", "tool", "openai" (a server's OpenAI-compatible API: `url=`, `model=`,
    `api="completions"` for an LLM served by `vllm serve` or `api="embeddings"`), or one added with
    `engines.registry.register_engine_kind`). instances: how many engine instances to start; with the
    option `urls=[...]` (several servers of a remote kind, instead of `url`) one per URL, each instance
    getting its own as `url`. max_efficient_batch: the batch size beyond which throughput stops growing
    (stage decomposition splits there); max_batch: the most requests in one batch; both default to what
    the kind's adapter declares (`default_profile`). ops: required for custom kinds.
    policy: the engine scheduler's batching policy (default: the app's). resources: where and with
    what an instance runs under the Ray executor: Ray actor options such as
    {"num_cpus": 1, "num_gpus": 1, "memory": 4e9, "resources": {"node_b": 0.1}, "max_restarts": 1}
    (ignored by the local executor). balancer: how work is spread over several instances:
    "least_loaded" (default: each batch goes to the least loaded free instance, the policy picking
    from one shared queue), or a per-call router for LLM engines (Autellix §4.3), which routes each
    call to one instance's own queue when it arrives: "locality" (Algorithm 2: calls of at most
    `balancer_options={"threshold": N}` prompt tokens, default 2048, go to the least-used instance,
    longer calls to their program's instance), "least_used", or "round_robin". admission (LLM
    engines under a policy that admits calls itself: fcfs, sjf, lamps, mlfq, plas, atlas): how many
    calls run on an instance at once: "capacity" (default: what the engine admits, its max_batch
    (vLLM's max_num_seqs) calls while its KV cache (token_budget) has room) or "efficient_batch"
    (at most max_efficient_batch calls: teola's earlier cap, kept for the benchmarks measured with
    it). Every other keyword is passed to the adapter (model, device, dtype, dsn, ...).
    """

    def __init__(
        self,
        name: str,
        kind: str,
        *,
        instances: int = 1,
        max_efficient_batch: int | None = None,
        max_batch: int | None = None,
        token_budget: int = 0,
        ops: list[str] | None = None,
        policy: str | None = None,
        resources: dict[str, Any] | None = None,
        balancer: str = DEFAULT_BALANCER,
        balancer_options: dict[str, Any] | None = None,
        admission: str = "capacity",
        **options: Any,
    ) -> None:
        if not isinstance(name, str) or not name:
            raise TypeError(f"Engine name must be a non-empty string, got {name!r}")
        declared = _declared(name, kind, ops, options)
        kind_ops, profile = declared if declared is not None else (frozenset(), EngineProfile())
        _check_arguments(name, instances, resources, admission)
        self.urls = _check_urls(name, options, instances)
        instances = len(self.urls) if self.urls else instances
        self.name = name
        self.kind = kind
        self.instances = instances
        self.ops = _prim_ops(name, ops if ops is not None else kind_ops)
        self.max_efficient_batch_given = max_efficient_batch is not None
        self.max_efficient_batch = (
            max_efficient_batch or machine_max_efficient_batch(kind, options) or profile.max_efficient_batch
        )
        if self.max_efficient_batch < 1:
            raise ValueError(f"Engine {name!r}: max_efficient_batch must be >= 1")
        # an explicit max_batch caps the adapter's; the default leaves the adapter's profile in force
        self.max_batch_given = max_batch is not None
        self.max_batch = max_batch or max(self.max_efficient_batch, profile.max_batch)
        self.token_budget = token_budget
        window = options.get("max_model_len", profile.context_window)
        self.context_window = (
            window if isinstance(window, int) and not isinstance(window, bool) and window > 0 else 0
        )
        self.policy = policy
        self.balancer, self.balancer_options = _check_balancer(name, balancer, balancer_options)
        self.admission = admission
        self.resources = dict(resources or {})
        self.options = options
        # what its scores rank by, for passes that prove two rankings equal (a backend given to
        # App.register_engine replaces it with its own)
        self.remote = isinstance(options.get("url"), str) or bool(self.urls)
        self.ranks_by = "" if self.remote else kind_ranks_by(kind, options)
        # whether its adapter batches continuously (vLLM, remote LLM servers): each request of a batch
        # runs and ends on its own, so the runtime keeps several batches in flight on an instance and
        # hands each entry its results as its own requests end
        self.continuous = declared is not None and kind_continuous(kind, options)
        # an LLM engine's costs as its started adapter reports them (App.start adopts them; None before)
        self.costs: EngineCosts | None = None
        # another engine's seconds per request and per item of each op, the same way (empty before)
        self.op_costs: dict[PrimOp, OpCost] = {}

    def instance_options(self, index: int) -> dict[str, Any]:
        """The adapter options of instance `index`: the options, with `urls[index]` as `url`."""
        if not self.urls:
            return dict(self.options)
        return {**{k: v for k, v in self.options.items() if k != "urls"}, "url": self.urls[index]}

    def info(self) -> EngineInfo:
        return EngineInfo(
            self.kind,
            self.ops,
            self.max_efficient_batch,
            self.token_budget,
            self.context_window,
            remote=self.remote,
            ranks_by=self.ranks_by,
            costs=self.costs,
            op_costs=self.op_costs,
        )

    def __repr__(self) -> str:
        return f"Engine({self.name!r}, kind={self.kind!r})"


def _declared(
    name: str, kind: Any, ops: list[str] | None, options: dict[str, Any]
) -> tuple[frozenset[str], EngineProfile] | None:
    """The ops and profile the adapter of `kind` declares (engines.registry.kind_defaults); None for a
    kind the registry does not know, which must then give its `ops`."""
    try:
        declared = kind_defaults(kind, options) if isinstance(kind, str) else None
    except ValueError as e:
        raise ValueError(f"Engine {name!r}: {e}") from None
    if ops is None and declared is None:
        raise ValueError(
            f"Engine {name!r}: unknown kind {kind!r}; known kinds: {', '.join(engine_kinds())}"
            " (a custom kind must also pass ops=[...])"
        )
    return declared


def _prim_ops(name: str, ops: Iterable[str]) -> frozenset[PrimOp]:
    """The engine's ops as PrimOp members; an unknown op name raises ValueError listing the ops."""
    try:
        return frozenset(PrimOp(o) for o in ops)
    except ValueError as e:
        raise ValueError(f"Engine {name!r}: {e}; ops are {[o.value for o in PrimOp]}") from None


def _check_arguments(name: str, instances: Any, resources: Any, admission: Any) -> None:
    """The plain arguments checked eagerly: instances an int >= 1, resources a dict of Ray actor
    options (or None), admission one of ADMISSIONS."""
    if not isinstance(instances, int) or instances < 1:
        raise ValueError(f"Engine {name!r}: instances must be an int >= 1, got {instances!r}")
    if resources is not None and not isinstance(resources, dict):
        raise TypeError(f"Engine {name!r}: resources must be a dict of Ray actor options, got {resources!r}")
    if admission not in ADMISSIONS:
        raise ValueError(
            f"Engine {name!r}: admission must be one of {', '.join(ADMISSIONS)}, got {admission!r}"
        )


def _check_urls(name: str, options: dict[str, Any], instances: int) -> list[str]:
    """The option `urls` (one server per instance) checked: a non-empty list of strings, not beside
    `url`, and `instances` left at 1 or equal to its length; [] without it."""
    urls = options.get("urls")
    if urls is None:
        return []
    if "url" in options:
        raise ValueError(
            f"Engine {name!r}: give url (one server) or urls (one instance per server), not both"
        )
    if not isinstance(urls, (list, tuple)) or not urls or not all(isinstance(u, str) and u for u in urls):
        raise ValueError(f"Engine {name!r}: urls must be a non-empty list of server URLs, got {urls!r}")
    if instances not in (1, len(urls)):
        raise ValueError(
            f"Engine {name!r}: instances={instances} but {len(urls)} urls; each URL is one "
            f"instance (leave instances out)"
        )
    return list(urls)


def _check_balancer(name: str, balancer: Any, options: Any) -> tuple[str, dict[str, Any]]:
    """Validate an engine's balancer choice eagerly (unknown names and options raise ValueError)."""
    known = [DEFAULT_BALANCER, *balancer_names()]
    if balancer not in known:
        raise ValueError(
            f"Engine {name!r}: unknown balancer {balancer!r}; known balancers: {', '.join(known)}"
        )
    if options is not None and not isinstance(options, dict):
        raise TypeError(
            f"Engine {name!r}: balancer_options must be a dict (e.g. {{'threshold': 2048}}), got {options!r}"
        )
    options = dict(options or {})
    if balancer == DEFAULT_BALANCER:
        if options:
            raise ValueError(
                f"Engine {name!r}: balancer {DEFAULT_BALANCER!r} takes no balancer_options, "
                f"got {sorted(options)}"
            )
        return balancer, options
    try:
        make_balancer(balancer, **options)
    except ValueError as e:
        raise ValueError(f"Engine {name!r}: {e}") from None
    return balancer, options
