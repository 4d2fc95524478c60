"""The remote LLM engine: an LLM behind an OpenAI-compatible completions API (`vllm serve`, or any
server with that API shape) behind the teola engine protocol, so an app runs on in-process vLLM or on
GPU servers you already run by configuration. Several servers are several instances of one engine
(`Engine("llm", kind="openai", urls=[...])`, one instance per URL), spread by the engine's balancer.

Prompts are rendered here with the model's chat template (the same `PromptRenderer` as the in-process
adapter) as parts + continuation (a call's earlier output and its tool results) + resume ids, and sent
to `/v1/completions` as token ids, so a partial prefill is an exact token prefix of the later full
prompt and the server's prefix cache reuses it. Prefill ops send a `max_tokens=1` request that only
warms the cache (a partial prefill shorter than one KV block, or of a prefix this adapter sent before,
is answered at once, "skipped", as the in-process adapter does: engines/llm_text/prefix_memo.py, engine
option skip_known_prefixes); decode ops stream (`stream_options.include_usage`) and, for splittable outputs,
emit each parsed item as soon as it is complete; a decode whose output nobody reads while it runs (no
items, no deltas: `execute`, not `stream`) is one non-streamed answer instead (less client CPU).

Like in-process vLLM the engine batches continuously (`continuous`): every request of a batch is its
own HTTP request, and the runtime keeps up to `max_num_seqs` batches in flight on one server
(`profile.max_inflight`), handing each entry its results as its own requests end. What the server can
do is probed at start (engines.openai.capabilities: vLLM's sampling fields, token ids, priority
scheduling, cached-token counts, health route, max_num_seqs and KV-cache size), with one log line each
and a fallback, so vLLM's extras are used when present and any OpenAI-compatible server works.
A decode's "json_schema" / "json_object" go to the server as `response_format` (declared as
Feature.STRUCTURED_OUTPUTS only on a server that takes vLLM's fields) and "logprobs" as the
completions API's `logprobs` (Feature.LOGPROBS). Requests go through the official `openai` async
client's request path as plain JSON (engines.openai.client: no typed models per chunk). `abort(owners)`
closes those requests' streams: vLLM aborts a request whose client went away.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from engines.assets.models import resolve_model
from engines.assets.paths import configure_engine_env
from engines.llm_text.batch_stream import Decoded, Emit, final, run_batch, stream_batch
from engines.llm_text.cost_probe import check_costs_option, engine_costs
from engines.llm_text.llm_requests import PromptRenderer, validate_parts
from engines.llm_text.prefix_memo import PrefixMemo
from engines.openai.capabilities import Capabilities, probe
from engines.openai.client import RemoteClient, RemoteEngineError, check_client_options
from engines.openai.reading import read_stream, read_whole
from engines.openai.wire import completion_body, counts
from engines.protocol import EngineProfile, Feature, StreamEvent
from engines.requests import DECODE_OPS, PREFILL_OPS, PrimOp

# vLLM's own default max_num_seqs on a GPU: a production server (no /server_info) is not throttled
# below what it would run anyway, and its queue orders the rest. With 16, teola queued calls on its
# side at 13 q/s and ran at 0.72x of LangGraph on the tool agent
# (bench/results/remote/deploy_tool_agent_saturation.md).
DEFAULT_MAX_NUM_SEQS = 256
UNSALTED = ("warn", "refuse")

log = logging.getLogger("teola.engines")


@dataclass(slots=True, eq=False)
class _Live:
    """One request being decoded: what abort() needs to stop it."""

    reader: asyncio.Future
    aborted: bool = False
    owners: list[str] = field(default_factory=list)


class OpenAILLMEngine:
    """An LLM served elsewhere over an OpenAI-compatible completions API (see the module docstring).

    Options: url (required: the server's base URL, e.g. "http://gpu-box:8000"; an `Engine` takes
    `urls=[...]` instead for one instance per server), model (the served model name, default
    "smollm2-135m-instruct"), tokenizer (a local model folder or short name whose tokenizer and chat
    template match the served model; default: `model` resolved locally), api_key (sent as a bearer
    token; default none), max_model_len (default: what the server reports), max_num_seqs (requests
    the server decodes at once: the most requests teola keeps in flight on it and in one batch;
    default: what the server reports (vLLM with VLLM_SERVER_DEV_MODE=1), else 256, vLLM's own default
    on a GPU; give the server's value so teola's queue, not the server's, orders what waits),
    max_efficient_batch (8), max_tokens (default per request, 256), timeout (seconds per request, 600),
    connect_timeout (10), retries (3: attempts after the first on connection errors, 408/409/429 and
    5xx answers, with the openai client's jittered backoff honouring Retry-After), max_connections
    (pool size; default the larger of 256 and max_num_seqs), unsalted (what a request carrying a tenant's
    `cache_salt` does on a server that does not take vLLM's fields, so every tenant's prompts share
    its prefix cache and one tenant can probe another's through response timing: "warn" (default),
    sent without it and logged once per engine instance naming the server; "refuse": it fails),
    skip_known_prefixes (True: a partial prefill under one KV block of the server's, or of a prefix this
    instance sent before, is answered at once without a request; False: every one is sent), costs (True:
    the server's costs as this client sees them, round trip included, fitted at start by a short probe,
    engines/llm_text/cost_probe.py; a profile's name or file: its costs; False: none reported).
    """

    ops = PREFILL_OPS | DECODE_OPS
    continuous = True
    default_profile = EngineProfile(
        max_batch=DEFAULT_MAX_NUM_SEQS,
        max_efficient_batch=8,
        context_window=2048,
        max_inflight=DEFAULT_MAX_NUM_SEQS,
    )

    def __init__(
        self,
        name: str,
        url: str | None = None,
        model: str = "smollm2-135m-instruct",
        tokenizer: str | None = None,
        api_key: str | None = None,
        max_model_len: int | None = None,
        max_num_seqs: int | None = None,
        max_efficient_batch: int | None = None,
        max_tokens: int = 256,
        timeout: float = 600.0,
        connect_timeout: float = 10.0,
        retries: int = 3,
        max_connections: int | None = None,
        unsalted: str = "warn",
        skip_known_prefixes: bool = True,
        costs: bool | str = True,
    ):
        if max_connections is None:  # one connection per in-flight stream
            max_connections = max(DEFAULT_MAX_NUM_SEQS, max_num_seqs if isinstance(max_num_seqs, int) else 0)
        self.base_url = check_client_options(name, url, timeout, connect_timeout, retries, max_connections)
        for key, value in (
            ("max_num_seqs", max_num_seqs or 1),
            ("max_tokens", max_tokens),
            ("max_model_len", max_model_len or 1),
            ("max_efficient_batch", max_efficient_batch or 1),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"engine {name!r}: option {key} must be a positive int, got {value!r}")
        if not isinstance(model, str) or not model:
            raise ValueError(f"engine {name!r}: option model must be the served model name, got {model!r}")
        if unsalted not in UNSALTED:
            raise ValueError(
                f"engine {name!r}: option unsalted must be one of {', '.join(UNSALTED)}, got {unsalted!r}"
            )
        if not isinstance(skip_known_prefixes, bool):
            raise ValueError(
                f"engine {name!r}: option skip_known_prefixes must be a bool, got {skip_known_prefixes!r}"
            )
        self.name = name
        self.costs_option = check_costs_option(name, costs)
        self.skip_known_prefixes = skip_known_prefixes
        self.prefixes: PrefixMemo | None = None  # once started
        self.unsalted = unsalted
        self._warned_unsalted = False
        self.model = model
        self.tokenizer_name = tokenizer or model
        self.max_model_len = max_model_len
        self.max_tokens = max_tokens
        self.max_num_seqs_option = max_num_seqs
        self.max_efficient_batch_option = max_efficient_batch
        self._client_args = (api_key, timeout, connect_timeout, retries, max_connections)
        self.profile = EngineProfile(context_window=max_model_len or 2048)
        self._size(max_num_seqs or DEFAULT_MAX_NUM_SEQS)
        self.caps = Capabilities()
        self.renderer: PromptRenderer | None = None
        self.client: RemoteClient | None = None
        self._live: dict[str, set[_Live]] = {}  # owner or tag -> its requests streaming now
        self.in_flight = 0  # requests sent and not yet answered (for diagnostics and tests)

    def _size(self, max_num_seqs: int) -> None:
        self.profile.max_batch = self.profile.max_inflight = max_num_seqs
        self.profile.max_efficient_batch = min(self.max_efficient_batch_option or 8, max_num_seqs)

    # ---- lifecycle -------------------------------------------------------------------------------
    async def start(self) -> None:
        """Load the tokenizer, check that the server serves `model` (retried while it comes up) and
        probe what it can do."""
        if self.client is not None:
            return
        if self.renderer is None:
            self.renderer = await asyncio.to_thread(self._load_renderer)
        client = RemoteClient(self.name, self.base_url, *self._client_args)
        try:
            await self._check_model(client)
            self.caps = await probe(client, self.model, self.renderer.token_ids([("user", "ping")], True))
        except BaseException:
            await client.aclose()
            raise
        if self.max_num_seqs_option is None and self.caps.max_num_seqs:
            self._size(self.caps.max_num_seqs)
        # OpenAI's completions API returns logprobs; structured outputs are vLLM's (its sampling fields)
        self.profile.features = frozenset(
            {Feature.LOGPROBS} | ({Feature.STRUCTURED_OUTPUTS} if self.caps.vllm_fields else set())
        )
        self.profile.token_budget = self.caps.token_budget
        self.prefixes = PrefixMemo(self.caps.block_size) if self.skip_known_prefixes else None
        self.client = client
        self.profile.costs = await engine_costs(self, self.costs_option, self.caps.block_size)

    async def _check_model(self, client: RemoteClient) -> None:
        import openai

        try:
            served = {m.id: m for m in (await client.api.models.list()).data}
        except openai.APIError as exc:
            raise client.error("models", exc) from exc
        if self.model not in served:
            raise RemoteEngineError(
                f"engine {self.name!r}: {self.base_url} does not serve model {self.model!r} "
                f"(served: {sorted(served) or 'none'}); set the engine option model to the "
                f"server's --served-model-name"
            )
        reported = (served[self.model].model_extra or {}).get("max_model_len")
        if self.max_model_len is None and isinstance(reported, int):
            self.max_model_len = self.profile.context_window = reported

    def _load_renderer(self) -> PromptRenderer:
        configure_engine_env()
        from transformers import AutoTokenizer

        try:
            path = resolve_model(self.tokenizer_name, prepare=True)
        except (ValueError, RuntimeError) as exc:
            raise ValueError(
                f"engine {self.name!r}: cannot load the tokenizer {self.tokenizer_name!r} locally "
                f"({exc}); set the engine option tokenizer to a local folder holding the served "
                f"model's tokenizer files"
            ) from None
        return PromptRenderer(AutoTokenizer.from_pretrained(str(path)))

    async def health(self) -> bool:
        """True while the server answers its health route (probed at start) with 200."""
        if self.client is None:
            return False
        answer = await self.client.get(self.caps.health_route)
        return answer is not None and answer.status_code == 200

    async def stop(self) -> None:
        client, self.client = self.client, None
        if client is not None:
            await client.aclose()

    # ---- requests --------------------------------------------------------------------------------
    async def abort(self, owners: list[str]) -> int:
        """Stop the streaming requests of these owners (query/program ids, or a request's "tag") by
        closing their connections; each returns what it produced so far, marked "aborted"."""
        stopped = {live for owner in owners for live in self._live.pop(owner, ())}
        for live in stopped:
            live.aborted = True
            live.reader.cancel()
        return len(stopped)

    def prompt_token_ids(self, parts, complete: bool = True) -> list[int]:
        """The token ids a request with these parts sends (for tests and cache accounting)."""
        if self.renderer is None:
            raise RuntimeError(f"engine {self.name!r} is not started; await engine.start() first")
        return self.renderer.token_ids(validate_parts(parts), complete)

    async def execute(self, op: str, requests: list[dict[str, Any]]) -> list[Any]:
        """Run one batch concurrently (the server batches them); one result per request, in order."""
        return await self._run(op, requests, None)

    def stream(self, op: str, requests: list[dict[str, Any]]) -> AsyncIterator[tuple[int, StreamEvent, Any]]:
        """Yield (i, "item", Item) for each complete item as it is parsed, (i, "delta", Delta) and
        (i, "progress", Progress) when asked for, then (i, "final", result) (engines.stream_events)."""
        return stream_batch(lambda emit: self._run(op, requests, emit))

    async def _run(self, op: str, requests: list[dict[str, Any]], emit: Emit | None) -> list[Any]:
        if self.client is None or self.renderer is None:
            raise RuntimeError(f"engine {self.name!r} is not started; await engine.start() first")
        return await run_batch(
            self.name,
            "openai",
            self.ops,
            op,
            requests,
            self.max_tokens,
            lambda i, req, em: self._one(op, i, req, em),
            emit,
        )

    def _body(self, prefill: bool, req: dict[str, Any], ids: list[int]) -> dict[str, Any]:
        """The JSON body of one request to /v1/completions (engines.openai.wire.completion_body); a
        tenant's cache_salt on a server that does not take it goes by option `unsalted`."""
        body = completion_body(self.name, self.model, self.max_model_len, self.caps, prefill, req, ids)
        if req["cache_salt"] and not self.caps.vllm_fields:
            self._unsalted()
        return body

    def _unsalted(self) -> None:
        """A tenant's cache_salt this server cannot take (option `unsalted`)."""
        if self.unsalted == "refuse":
            raise RemoteEngineError(
                f"engine {self.name!r}: its server does not take vLLM's cache_salt, so tenants "
                "would share its prefix cache; serve vLLM, or set the engine option "
                "unsalted='warn' to accept that"
            )
        if not self._warned_unsalted:
            self._warned_unsalted = True
            log.warning(
                "engine %s (%s): the server does not take vLLM's cache_salt; tenants' prompts share its "
                "prefix cache, so one tenant can probe another's prompts through response timing (serve "
                "vLLM, or set the engine option unsalted='refuse')",
                self.name,
                self.base_url,
            )

    async def _one(self, op: str, i: int, req: dict[str, Any], emit: Emit | None) -> dict[str, Any]:
        import openai

        prefill = op in PREFILL_OPS
        # a call continued after a tool call (its earlier output and the tool results), then (when
        # preempted) the tokens it decoded before
        ids = (
            self.renderer.request_ids(req)
            + self.renderer.continuation_ids(req["continuation"])
            + req["resume_ids"]
        )
        body = self._body(prefill, req, ids)
        if op == PrimOp.PARTIAL_PREFILLING and self.prefixes is not None:
            known = self.prefixes.answer(ids, req["cache_salt"])
            if known is not None:
                return await final(emit, i, known)
        self.in_flight += 1
        try:
            if prefill:
                answer = await self.client.complete(body)
                return await final(emit, i, counts(len(ids), answer.get("usage")))
            return await final(emit, i, await self._decode(i, req, body, len(ids), emit))
        except openai.APIError as exc:
            raise self.client.error("completions", exc) from exc
        finally:
            self.in_flight -= 1

    async def _decode(
        self, i: int, req: dict[str, Any], body: dict[str, Any], n_prompt: int, emit: Emit | None
    ) -> dict[str, Any]:
        out = Decoded(i, req, emit)
        ended: dict[str, Any] = {"logprobs": []}
        # a decode nobody reads while it runs (no items to pass on or stop at, no deltas) is one
        # answer, not a stream: parsing one chunk per token costs the client ~0.4 ms of CPU a token
        whole = emit is None and not req["split"]
        read = read_whole if whole else read_stream
        assert self.client is not None and self.renderer is not None  # _run checked that it started
        reader = asyncio.ensure_future(read(self.client, body, out, ended, self.renderer.special_tokens))
        live = _Live(reader, owners=[k for k in (req["owner"], req["tag"]) if k is not None])
        for key in live.owners:
            self._live.setdefault(key, set()).add(live)
        try:
            await reader
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if not live.aborted or (current is not None and current.cancelling()):
                raise
        finally:
            reader.cancel()
            for key in live.owners:
                mine = self._live.get(key)
                if mine is not None:
                    mine.discard(live)
                    if not mine:
                        del self._live[key]
        usage = ended.get("usage")
        text = "".join(out.text)
        token_ids = out.token_ids if self.caps.token_ids else self.renderer.continuation_ids([text])
        tokens = int(usage.get("completion_tokens") or 0) if usage is not None else 0
        tokens = tokens or len(token_ids)
        result = {
            "text": text,
            "items": await out.items(),
            **counts(n_prompt, usage),
            "num_output_tokens": tokens,
            "output_token_ids": token_ids,
            # None when decoding was cut short because every item asked for was out
            "finish_reason": ended.get("finish_reason") or "stop",
        }
        if req["logprobs"] is not None:
            result["logprobs"] = ended["logprobs"]
        if live.aborted:
            result["aborted"] = True
        return result
