"""The OpenAI-compatible front door: agent code written against the OpenAI SDK (or any framework
on top of it) gets teola's program-level scheduling without importing teola.

- ``POST /v1/chat/completions`` and ``POST /v1/completions``, streaming (server-sent events in
  OpenAI's chunk format, ``stream_options.include_usage`` honored) or not. ``model`` names an app
  served here (its LLM engine: the one named "llm", or its only one) or ``"<app>/<engine>"``;
  ``GET /v1/models`` lists them. Each request is one call queued on that engine's scheduler, so
  the app's policy (e.g. "atlas", "plas", "mlfq") ranks it against every other call and query.
- Program (session) id: header ``x-teola-program``, else the body's ``user`` field; calls with the
  same id are one program. Without either, the call is a program of its own. A program is kept
  per tenant (its id in the policy is ``"<tenant>/<id>"``).
- Parents: header ``x-teola-parent`` (comma-separated call ids of this program's earlier calls
  the call depends on; ATLAS follows the critical path through them). ``x-teola-call`` names the
  call (default: a fresh id); every answer carries ``x-teola-call`` and ``x-teola-program``, and
  its ``id`` is the call id.
- A program ends when a call carries ``x-teola-program-end: true`` (after that call) or after
  ``settings.program_idle_timeout`` seconds without a call.
- Auth and tenants as on every other endpoint; with several tenants, prompts carry the tenant's
  prefix-cache salt. Messages are rendered with the model's chat template: one system and one
  user message as they are, longer conversations flattened into one user turn.
"""
from __future__ import annotations

import asyncio
import itertools
import json
import uuid
from typing import Any, AsyncIterator, Callable

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse, StreamingResponse

from teola.runtime import CallFailed, llm_request
import teola.server.openai_format as fmt
from teola.server.errors import ApiError
from teola.server.schemas import ErrorResponse
from teola.server.state import ServerState

_call_ids = itertools.count(1)
_ERRORS = {status: {"model": ErrorResponse} for status in (400, 401, 404, 413, 422, 500, 502, 503)}
_ANSWER = {200: {"description": "an OpenAI response object, or server-sent chunks when stream is true",
                 "content": {"application/json": {"schema": {"type": "object"}}, "text/event-stream": {}}}}
_COMMON = {"model": {"type": "string"}, "stream": {"type": "boolean"}, "max_tokens": {"type": "integer"},
           "temperature": {"type": "number"}, "stop": {}, "user": {"type": "string"}, "seed": {"type": "integer"},
           "stream_options": {"type": "object"}}


def _body_schema(required: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {"requestBody": {"required": True, "content": {"application/json": {"schema": {
        "type": "object", "required": ["model", required], "properties": {**_COMMON, required: schema}}}}}}


class ProgramClock:
    """Ends client programs: on request, or once idle for `idle` seconds."""

    def __init__(self, idle: float) -> None:
        self.idle = idle
        self._timers: dict[str, asyncio.TimerHandle] = {}

    def touch(self, runtime: Any, pid: str) -> None:
        """A call of `pid` finished: (re)start its idle timer."""
        old = self._timers.pop(pid, None)
        if old is not None:
            old.cancel()
        self._timers[pid] = asyncio.get_running_loop().call_later(self.idle, self.end, runtime, pid)

    def busy(self, pid: str) -> None:
        """A call of `pid` is running: it is not idle."""
        old = self._timers.pop(pid, None)
        if old is not None:
            old.cancel()

    def end(self, runtime: Any, pid: str) -> None:
        timer = self._timers.pop(pid, None)
        if timer is not None:
            timer.cancel()
        runtime.end_program(pid)


def openai_router(state: ServerState, auth: Callable[..., None]) -> APIRouter:
    """The front door's routes, authenticated by `auth` (the server's key check)."""
    api = APIRouter(dependencies=[Depends(auth)], tags=["openai"], responses=_ERRORS)
    clock = ProgramClock(state.settings.program_idle_timeout)

    @api.get("/v1/models", summary="The LLM engines served through the OpenAI-compatible API")
    async def models() -> dict[str, Any]:
        ids = [f"{name}/{engine}" for name, app in sorted(state.apps.items()) for engine in _llm_engines(app)]
        return {"object": "list", "data": [{"id": i, "object": "model", "owned_by": "teola"} for i in ids]}

    @api.post("/v1/chat/completions", summary="OpenAI-compatible chat completion (one program call)",
              responses=_ANSWER, openapi_extra=_body_schema("messages", {"type": "array", "items": {"type": "object"}}))
    async def chat(request: Request) -> Any:
        body = await _json(request)
        return await _serve(state, clock, request, body, True, fmt.chat_parts(body.get("messages")))

    @api.post("/v1/completions", summary="OpenAI-compatible completion (one program call)",
              responses=_ANSWER, openapi_extra=_body_schema("prompt", {"type": "string"}))
    async def completions(request: Request) -> Any:
        body = await _json(request)
        return await _serve(state, clock, request, body, False, fmt.completion_parts(body.get("prompt")))
    return api


async def _json(request: Request) -> dict[str, Any]:
    try:
        body = json.loads(await request.body())
    except ValueError as exc:
        raise ApiError(400, "invalid_json", f"the body is not JSON: {exc}") from None
    if not isinstance(body, dict):
        raise ApiError(422, "invalid_request", "the body must be a JSON object")
    return body


def _llm_engines(app: Any) -> list[str]:
    return [name for name, spec in app.engines.items() if "decoding" in {getattr(o, "value", o) for o in spec.ops}]


def _target(state: ServerState, model: Any) -> tuple[Any, str]:
    """The app and LLM engine `model` names; 404 listing what is served otherwise."""
    if not isinstance(model, str) or not model:
        raise ApiError(422, "invalid_request", "model must name an app served here (or '<app>/<engine>')")
    app_name, _, engine = model.partition("/")
    app = state.apps.get(app_name)
    engines = _llm_engines(app) if app is not None else []
    if not engine:
        engine = "llm" if "llm" in engines else engines[0] if len(engines) == 1 else ""
    if app is None or engine not in engines:
        served = [f"{n}/{e}" for n, a in sorted(state.apps.items()) for e in _llm_engines(a)]
        raise ApiError(404, "unknown_model", f"unknown model {model!r}; served: {', '.join(served) or 'none'}")
    return app, engine


def _program(request: Request, body: dict[str, Any]) -> tuple[str, bool, str, list[str] | None]:
    """(program id, whether it ends after this call, call id, parent call ids) of a request."""
    tenant = getattr(request.state, "tenant", "default")
    given = request.headers.get("x-teola-program") or body.get("user")
    if given is not None and (not isinstance(given, str) or not given.strip()):
        raise ApiError(422, "invalid_request", f"the program id (x-teola-program or user) must be a non-empty "
                       f"string, got {given!r}")
    ends = request.headers.get("x-teola-program-end", "").lower() in ("1", "true", "yes") or given is None
    pid = f"{tenant}/{given.strip() if given else 'call-' + uuid.uuid4().hex[:12]}"
    call_id = request.headers.get("x-teola-call") or f"call-{next(_call_ids)}"
    header = request.headers.get("x-teola-parent")
    parents = [p.strip() for p in header.split(",") if p.strip()] if header is not None else None
    return pid, ends, call_id, parents


async def _serve(state: ServerState, clock: ProgramClock, request: Request, body: dict[str, Any], chat: bool,
                 parts: list[list[str]]) -> Any:
    app, engine = _target(state, body.get("model"))
    gen = fmt.generation(body)
    pid, ends, call_id, parents = _program(request, body)
    if app.runtime is None:
        await app.start()
    runtime = app.runtime
    call = llm_request(parts, True, gen)
    if "seed" in gen:
        call["seed"] = gen["seed"]
    if state.tenants.several:
        call["cache_salt"] = state.tenants.salt(request.state.tenant)
    model = body["model"]
    headers = {"x-teola-call": call_id, "x-teola-program": pid}

    def submit(on_delta: Callable[[str], None] | None = None) -> Any:
        return runtime.submit_call(engine, call, program=pid, call_id=call_id, parents=parents, on_delta=on_delta)

    def done() -> None:
        clock.end(runtime, pid) if ends else clock.touch(runtime, pid)

    options = body.get("stream_options") or {}
    if not isinstance(options, dict):
        raise ApiError(422, "invalid_request", f"stream_options must be an object, got {options!r:.80}")
    clock.busy(pid)
    if body.get("stream"):
        call["stream_text"] = True
        include_usage = bool(options.get("include_usage"))
        return StreamingResponse(_stream(submit, done, chat, call_id, model, gen["max_tokens"], include_usage),
                                 media_type="text/event-stream", headers={**headers, "Cache-Control": "no-cache"})
    try:
        outcome = await submit()
    except CallFailed as exc:
        raise ApiError(502, "engine_failed", str(exc)) from None
    finally:
        done()
    return JSONResponse(fmt.response(chat, call_id, model, outcome.result, gen["max_tokens"]), headers=headers)


async def _stream(submit: Callable[..., Any], done: Callable[[], None], chat: bool, call_id: str, model: str,
                  max_tokens: int, include_usage: bool) -> AsyncIterator[str]:
    """The call's text as OpenAI stream chunks; a client that goes away withdraws (or aborts) it."""
    queue: asyncio.Queue = asyncio.Queue()
    task = asyncio.ensure_future(submit(queue.put_nowait))
    task.add_done_callback(lambda _: queue.put_nowait(None))
    try:
        yield fmt.chunk(chat, call_id, model, "" if chat else None, role=True)
        while (piece := await queue.get()) is not None:
            yield fmt.chunk(chat, call_id, model, piece)
        try:
            result = task.result().result
        except CallFailed as exc:
            yield f"data: {json.dumps({'error': {'message': str(exc), 'type': 'engine_failed'}})}\n\n"
            return
        yield fmt.chunk(chat, call_id, model, None, finish=fmt.finish_reason(result, max_tokens))
        if include_usage:
            yield fmt.chunk(chat, call_id, model, use=fmt.usage(result))
        yield "data: [DONE]\n\n"
    finally:
        if not task.done():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        done()
