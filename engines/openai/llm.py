"""The remote LLM engine: a vLLM server's OpenAI-compatible API (`vllm serve`) behind the teola
engine protocol, so an app runs on in-process vLLM or on GPU servers you already run by configuration.

Prompts are rendered here with the model's chat template (the same `PromptRenderer` as the in-process
adapter) and sent to `/v1/completions` as token ids, so a partial prefill is an exact token prefix of
the later full prompt and the server's prefix cache reuses it. Prefill ops send a `max_tokens=1`
request that only warms the cache; decode ops stream (`stream_options.include_usage`) and, for
splittable outputs, emit each parsed item as soon as it is complete. `priority` goes to vLLM's
priority scheduling (start the server with `--scheduling-policy priority`), `cache_salt` keeps
tenants' cached prefixes apart, and cached-token counts come from
`usage.prompt_tokens_details.cached_tokens` (start it with `--enable-prompt-tokens-details`).
`abort(owners)` closes those requests' streams: vLLM aborts a request whose client went away.
"""
from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from engines.models import resolve_model
from engines.openai.http_client import RemoteClient, RemoteEngineError, check_client_options
from engines.paths import configure_engine_env
from engines.protocol import EngineProfile
from engines.llm_text.split_parser import SplitParser, emit_items
from engines.llm_text.llm_requests import PromptRenderer, check_request
from engines.requests import DECODE_OPS, PREFILL_OPS

# vLLM's own neutral values, sent explicitly so a server's defaults (`--generation-config auto`
# reads the model's generation_config.json) cannot change what the in-process adapter would sample
NEUTRAL_SAMPLING = {"top_p": 1.0, "top_k": 0, "min_p": 0.0, "repetition_penalty": 1.0,
                    "presence_penalty": 0.0, "frequency_penalty": 0.0, "n": 1}


@dataclass(slots=True, eq=False)
class _Live:
    """One request being decoded: what abort() needs to stop it."""
    reader: asyncio.Future
    aborted: bool = False
    owners: list[str] = field(default_factory=list)


class OpenAILLMEngine:
    """An LLM served elsewhere over vLLM's OpenAI-compatible API.

    Options: url (required: the server's base URL, e.g. "http://gpu-box:8000"), model (the served
    model name, default "smollm2-135m-instruct"), tokenizer (a local model folder or short name whose
    tokenizer and chat template match the served model; default: `model` resolved locally),
    api_key (sent as a bearer token; default none), max_model_len (default: what the server reports),
    max_num_seqs (the batch size the scheduler sends, 16), max_efficient_batch (8), max_tokens
    (default per request, 256), timeout (seconds per read, 600), connect_timeout (10), retries (3:
    attempts after the first on connection errors and 502/503/504), backoff (0.5 s, doubled per
    retry), max_connections (pool size, 64).
    """

    ops = PREFILL_OPS | DECODE_OPS
    default_profile = EngineProfile(max_batch=16, max_efficient_batch=8, context_window=2048)

    def __init__(self, name: str, url: str | None = None, model: str = "smollm2-135m-instruct",
                 tokenizer: str | None = None, api_key: str | None = None, max_model_len: int | None = None,
                 max_num_seqs: int = default_profile.max_batch, max_efficient_batch: int | None = None,
                 max_tokens: int = 256, timeout: float = 600.0, connect_timeout: float = 10.0,
                 retries: int = 3, backoff: float = 0.5, max_connections: int = 64):
        self.base_url = check_client_options(name, url, timeout, connect_timeout, retries, backoff, max_connections)
        for key, value in (("max_num_seqs", max_num_seqs), ("max_tokens", max_tokens),
                           ("max_model_len", max_model_len or 1), ("max_efficient_batch", max_efficient_batch or 1)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"engine {name!r}: option {key} must be a positive int, got {value!r}")
        if not isinstance(model, str) or not model:
            raise ValueError(f"engine {name!r}: option model must be the served model name, got {model!r}")
        self.name = name
        self.model = model
        self.tokenizer_name = tokenizer or model
        self.max_model_len = max_model_len
        self.max_tokens = max_tokens
        self._client_args = (api_key, timeout, connect_timeout, retries, backoff, max_connections)
        self.profile = EngineProfile(max_batch=max_num_seqs, context_window=max_model_len or 2048,
                                     max_efficient_batch=min(max_efficient_batch or 8, max_num_seqs))
        self.renderer: PromptRenderer | None = None
        self.client: RemoteClient | None = None
        self._live: dict[str, set[_Live]] = {}  # owner or tag -> its requests streaming now
        self._request_ids = itertools.count()

    # ---- lifecycle -------------------------------------------------------------------------------
    async def start(self) -> None:
        """Load the tokenizer and check that the server serves `model` (retried while it comes up)."""
        if self.client is not None:
            return
        self.renderer = await asyncio.to_thread(self._load_renderer)
        client = RemoteClient(self.name, self.base_url, *self._client_args)
        try:
            response = await client.get("/v1/models")
            served = {m.get("id"): m for m in response.json().get("data", [])} if response.status_code == 200 else {}
        except Exception:
            await client.aclose()
            raise
        if self.model not in served:
            await client.aclose()
            raise RemoteEngineError(f"engine {self.name!r}: {self.base_url} does not serve model {self.model!r} "
                                    f"(HTTP {response.status_code}; served: {sorted(served) or 'none'}); "
                                    f"set the engine option model to the server's --served-model-name")
        if self.max_model_len is None and isinstance(served[self.model].get("max_model_len"), int):
            self.max_model_len = served[self.model]["max_model_len"]
            self.profile.context_window = self.max_model_len
        self.client = client

    def _load_renderer(self) -> PromptRenderer:
        configure_engine_env()
        from transformers import AutoTokenizer

        try:
            path = resolve_model(self.tokenizer_name, prepare=True)
        except (ValueError, RuntimeError) as exc:
            raise ValueError(f"engine {self.name!r}: cannot load the tokenizer {self.tokenizer_name!r} locally "
                             f"({exc}); set the engine option tokenizer to a local folder holding the served "
                             f"model's tokenizer files") from None
        return PromptRenderer(AutoTokenizer.from_pretrained(str(path)))

    async def health(self) -> bool:
        """True while the server answers /health with 200."""
        if self.client is None:
            return False
        try:
            return (await self.client.http.get("/health")).status_code == 200
        except Exception:
            return False

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
        return self.renderer.token_ids([tuple(p) for p in parts], complete)

    async def execute(self, op: str, requests: list[dict[str, Any]]) -> list[Any]:
        """Run one batch concurrently (the server batches them); one result per request, in order."""
        return await self._run_batch(op, requests, None)

    async def stream(self, op: str, requests: list[dict[str, Any]]) -> AsyncIterator[tuple[int, str, Any]]:
        """Yield (i, "item", text) for each complete item as it is parsed, then (i, "final", result)."""
        queue: asyncio.Queue = asyncio.Queue()

        async def emit(i: int, kind: str, value: Any) -> None:
            queue.put_nowait((i, kind, value))

        batch = asyncio.ensure_future(self._run_batch(op, requests, emit))
        batch.add_done_callback(lambda _: queue.put_nowait(None))
        try:
            while (event := await queue.get()) is not None:
                yield event
            batch.result()
        finally:
            if not batch.done():
                batch.cancel()
                await asyncio.gather(batch, return_exceptions=True)

    async def _run_batch(self, op: str, requests: list[dict[str, Any]],
                         emit: Callable[[int, str, Any], Awaitable[None]] | None) -> list[Any]:
        if op not in self.ops:
            raise ValueError(f"engine {self.name!r} (openai) does not run op {op!r}; it runs {', '.join(sorted(self.ops))}")
        if self.client is None or self.renderer is None:
            raise RuntimeError(f"engine {self.name!r} is not started; await engine.start() first")
        if not isinstance(requests, list):
            raise ValueError(f"requests must be a list of dicts, got {type(requests).__name__}")
        checked = [check_request(op, r, self.max_tokens) for r in requests]
        tasks = [asyncio.ensure_future(self._one(op, i, req, emit)) for i, req in enumerate(checked)]
        try:
            return list(await asyncio.gather(*tasks))
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    def _body(self, prefill: bool, req: dict[str, Any], ids: list[int]) -> dict[str, Any]:
        max_tokens = 1 if prefill else req["max_tokens"]
        if self.max_model_len and len(ids) + max_tokens > self.max_model_len:
            raise ValueError(f"engine {self.name!r}: prompt of {len(ids)} tokens + max_tokens {max_tokens} exceeds "
                             f"max_model_len {self.max_model_len}; send a shorter prompt or serve a longer context")
        body = {"model": self.model, "prompt": ids, "max_tokens": max_tokens, **NEUTRAL_SAMPLING,
                "temperature": 0.0 if prefill else req["temperature"], "stop": [] if prefill else (req["stop"] or []),
                "ignore_eos": req["ignore_eos"] and not prefill, "seed": req["seed"], "priority": req["priority"],
                "skip_special_tokens": True, "return_token_ids": True,
                "stream": not prefill, **({} if prefill else {"stream_options": {"include_usage": True}})}
        if req["cache_salt"]:
            body["cache_salt"] = req["cache_salt"]
        return body

    async def _one(self, op: str, i: int, req: dict[str, Any], emit) -> dict[str, Any]:
        prefill = op in PREFILL_OPS
        ids = self.renderer.token_ids(req["parts"], req["complete"]) + req["resume_ids"]
        body = self._body(prefill, req, ids)
        if prefill:
            answer = await self.client.post("/v1/completions", body)
            result: dict[str, Any] = _counts(len(ids), answer.get("usage"))
        else:
            result = await self._decode(i, req, body, len(ids), emit)
        if emit is not None:
            await emit(i, "final", result)
        return result

    async def _decode(self, i: int, req: dict[str, Any], body: dict[str, Any], n_prompt: int, emit) -> dict[str, Any]:
        state = _DecodeState(SplitParser(req["split"]) if req["split"] else None, req["max_items"])
        reader = asyncio.ensure_future(self._read(i, req, body, state, emit))
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
        items = await state.finish(i, emit)
        result = {"text": "".join(state.text), "items": items, **_counts(n_prompt, state.usage),
                  "num_output_tokens": len(state.generated), "output_token_ids": state.generated}
        if live.aborted:
            result["aborted"] = True
        return result

    async def _read(self, i: int, req: dict[str, Any], body: dict[str, Any], state: "_DecodeState", emit) -> None:
        async with self.client.stream_events("/v1/completions", body) as events:
            async for chunk in events:
                if "error" in chunk:
                    raise RemoteEngineError(f"engine {self.name!r}: the server failed the request: {chunk['error']}")
                if chunk.get("usage"):
                    state.usage = chunk["usage"]
                for choice in chunk.get("choices") or ():
                    if await state.feed(i, choice, req, emit):
                        return  # every item asked for is out: closing the stream stops the decode


class _DecodeState:
    """What a streamed decode has produced so far."""

    def __init__(self, parser: SplitParser | None, max_items: int | None) -> None:
        self.parser = parser
        self.max_items = max_items if parser is not None else None
        self.text: list[str] = []
        self.generated: list[int] = []
        self.usage: dict[str, Any] | None = None
        self.stopped = False

    async def feed(self, i: int, choice: dict[str, Any], req: dict[str, Any], emit) -> bool:
        """Take one streamed choice delta; True once `max_items` items are out."""
        text, token_ids = choice.get("text") or "", choice.get("token_ids") or []
        self.text.append(text)
        self.generated.extend(token_ids)
        if emit is not None and req["stream_text"] and text:
            await emit(i, "delta", text)
        if emit is not None and req["progress"] and token_ids:
            await emit(i, "progress", len(self.generated))
        if self.parser is not None and text:
            self.stopped = await emit_items(self.parser, text, self.max_items, i, emit)
        return self.stopped

    async def finish(self, i: int, emit) -> list[str]:
        """The items of the whole output; the trailing ones are emitted now."""
        if self.parser is None:
            return []
        items = self.parser.items[:self.max_items]
        if not self.stopped:
            limit = None if self.max_items is None else max(0, self.max_items - len(items))
            for item in self.parser.finish()[:limit]:
                items.append(item)
                if emit is not None:
                    await emit(i, "item", item)
        return items


def _counts(n_prompt: int, usage: dict[str, Any] | None) -> dict[str, Any]:
    details = (usage or {}).get("prompt_tokens_details") or {}
    return {"num_prompt_tokens": int((usage or {}).get("prompt_tokens") or n_prompt),
            "num_cached_tokens": int(details.get("cached_tokens") or 0)}
