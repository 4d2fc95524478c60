"""`SentenceTransformersAdapter`: what the sentence-transformers engines (embedding, reranker) share.
A batch is one model call run in a worker thread, so the event loop keeps serving other engines."""

from __future__ import annotations

import asyncio
import threading
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator
from typing import Any

from engines.machine.core_share import process_share
from engines.machine.op_costs import (
    SAMPLE_SALT,
    ProbeRun,
    check_op_costs_option,
    engine_op_costs,
    request_chars,
)
from engines.protocol import EngineProfile, StreamEvent, profile_with

# sentence-transformers models created with exclusive=True compute one batch at a time in a process
_EXCLUSIVE = threading.Lock()
# they lend and borrow cores as one group (engines/machine/core_share.py)
SHARE_GROUP = "sentence_transformers"


class SentenceTransformersAdapter(ABC):
    """Subclasses set `ops` (one op), `kind` (their engine kind), `default_profile`, and implement
    `_load()` (build the model, blocking), `_inputs(requests)` (validate requests into model inputs),
    `_run(inputs)` (one blocking model call -> one result per input) and `_probe_request(i, salt)`
    (one request of the cost probe). Options shared by both: device (None = the
    library's choice: cuda if available, else cpu), max_batch, max_efficient_batch, torch_threads
    (torch's intra-op threads; process-wide, so the last model loaded sets it; None leaves torch's
    default) and exclusive (True: compute one batch at a time with every other exclusive model of the
    process, so models that share cores do not run over each other) and share_cores (True, with
    torch_threads: a batch computed while the process's other core-sharing engines (vLLM) are idle
    uses one thread per core of the process instead of torch_threads; engines/machine/core_share.py).
    costs (True: the op's seconds per request and per item fitted at start by a short probe,
    engines/machine/op_costs.py; a profile's name or file: its `op_cost` table; False: none reported).
    Defaults for the hardware come from engines/tuning/settings.py."""

    ops: frozenset[str]
    kind: str
    default_profile: EngineProfile

    def __init__(
        self,
        name: str,
        device: str | None,
        max_batch: int | None,
        max_efficient_batch: int | None,
        torch_threads: int | None = None,
        exclusive: bool = False,
        share_cores: bool = False,
        costs: bool | str = True,
    ):
        self.costs_option = check_op_costs_option(name, self.kind, self.ops, costs)
        if torch_threads is not None and (
            isinstance(torch_threads, bool) or not isinstance(torch_threads, int) or torch_threads < 1
        ):
            raise ValueError(
                f"engine {name!r}: option torch_threads must be a positive int or omitted, "
                f"got {torch_threads!r}"
            )
        if not isinstance(exclusive, bool):
            raise ValueError(f"engine {name!r}: option exclusive must be true or false, got {exclusive!r}")
        if not isinstance(share_cores, bool):
            raise ValueError(
                f"engine {name!r}: option share_cores must be true or false, got {share_cores!r}"
            )
        self.torch_threads = torch_threads
        self.exclusive = exclusive
        self.share_cores = share_cores and torch_threads is not None
        self._sharing = False
        if device is not None and not isinstance(device, str):
            raise ValueError(
                f"engine {name!r}: option device must be a torch device string like 'cpu' or "
                f"'cuda:0', or omitted, got {device!r}"
            )
        try:
            self.profile = profile_with(self.default_profile, max_batch, max_efficient_batch)
        except ValueError as e:
            raise ValueError(f"engine {name!r}: {e}") from None
        self.name = name
        self.device = device
        self.calls: list[int] = []
        self._model: Any = None

    async def start(self) -> None:
        """Load the model (a few seconds on CPU)."""
        if self._model is None:
            self._model = await asyncio.to_thread(self._load_with_threads)
            if self.share_cores:
                share = process_share()
                share.join(SHARE_GROUP, share.all_cores[: self.torch_threads])
                self._sharing = True
            runs = {str(op): self._probe_run(op) for op in self.ops}
            chars = {op: float(request_chars(self._probe_request(0, SAMPLE_SALT))) for op in runs}
            self.profile.op_costs = await engine_op_costs(
                self.name, self.kind, self.costs_option, runs, item_chars=chars
            )
            self._forget_probe()

    def _probe_run(self, op: str) -> ProbeRun:
        async def run(n: int, salt: str) -> Any:
            return await self.execute(op, [self._probe_request(i, salt) for i in range(n)])

        return run

    def _forget_probe(self) -> None:
        """Drop the probe's batches from the counts of the engine's work."""
        self.calls.clear()

    def _load_with_threads(self) -> Any:
        if self.torch_threads is not None:
            import torch

            torch.set_num_threads(self.torch_threads)
        return self._load()

    @abstractmethod
    def _load(self) -> Any:
        """Build the model (blocking)."""

    @abstractmethod
    def _inputs(self, requests: list[dict[str, Any]]) -> list[Any]:
        """Validate a batch of requests into model inputs (ValueError naming a bad request)."""

    @abstractmethod
    def _run(self, inputs: list[Any]) -> list[Any]:
        """One blocking model call: one result per input, in order."""

    @abstractmethod
    def _probe_request(self, i: int, salt: str) -> dict[str, Any]:
        """Request `i` of a cost probe's batch, unique by `salt`."""

    def _require_model(self) -> Any:
        if self._model is None:
            raise RuntimeError(f"engine {self.name!r} is not started; await engine.start() first")
        return self._model

    async def execute(self, op: str, requests: list[dict[str, Any]]) -> list[Any]:
        """One result per request, in order; the whole batch is one model call."""
        if op not in self.ops:
            raise ValueError(
                f"engine {self.name!r} ({type(self).__name__}) runs only {sorted(self.ops)}, not {op!r}"
            )
        inputs = self._inputs(requests)
        if not self._sharing:
            return await asyncio.to_thread(self._compute, inputs, None)
        share = process_share()
        cores = await share.enter(SHARE_GROUP)
        try:
            return await asyncio.to_thread(self._compute, inputs, len(cores))
        finally:
            share.leave(SHARE_GROUP)

    def _compute(self, inputs: list[Any], threads: int | None) -> list[Any]:
        if not self.exclusive:
            return self._run_on(inputs, threads)
        with _EXCLUSIVE:
            return self._run_on(inputs, threads)

    def _run_on(self, inputs: list[Any], threads: int | None) -> list[Any]:
        if threads is not None:
            import torch

            if torch.get_num_threads() != threads:
                torch.set_num_threads(threads)
        return self._run(inputs)

    async def stream(
        self, op: str, requests: list[dict[str, Any]]
    ) -> AsyncIterator[tuple[int, StreamEvent, Any]]:
        """No partial outputs: yields (i, "final", result) per request after the batch."""
        for i, result in enumerate(await self.execute(op, requests)):
            yield i, StreamEvent.FINAL, result

    async def health(self) -> bool:
        return self._model is not None

    async def stop(self) -> None:
        self._model = None
        if self._sharing:
            process_share().leave_share(SHARE_GROUP)
            self._sharing = False
