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
  prefix-cache salt.
- ``POST /v1/embeddings`` embeds on an app's embedding engine (``"<app>/<engine>"``), as a query of
  one embedding primitive batched with every other query's (teola.server.openai.embeddings);
  ``GET /v1/models`` lists the embedding engines too.
- Chat messages go to the engine whole ("messages") and are rendered with the model's chat
  template, tools included (engines/llm_text/chat_messages.py: the template's own tool syntax
  when it has one, else teola's); the model's tool calls come back as OpenAI ``tool_calls``
  (teola.server.openai.tools), whole or as streamed deltas, with finish_reason "tool_calls";
  ``role: "tool"`` results and earlier assistant calls are rendered back into the conversation.
  ``/v1/completions`` prompts are sent raw (no chat template). finish_reason is the engine's.
- response_format json_object / json_schema and a forced tool_choice ("required" or a named
  function) are decoded under the engine's structured outputs (the request's "json_object" /
  "json_schema"); a forced call comes back as that tool call. An engine that does not declare
  the capability (engines.protocol.Feature) answers 400 naming it. So do logprobs / top_logprobs
  (a completion's logprobs), returned in OpenAI's shape (streamed: all in the finish chunk).
- Streamed, the first chunk goes out with the first token (the chat role in that chunk), as vLLM
  and OpenAI send it; nothing is sent before.
- Bodies are read only when sent as ``Content-Type: application/json`` (415 otherwise: a web page
  cannot make a cross-site text/plain POST spend LLM calls). Headers echoing ids (a program id
  "Zoë") are percent-encoded outside printable ASCII.
- Every request field is honoured or refused with a 400 naming it (teola.server.openai.format).
  Errors are OpenAI's error object with OpenAI's status codes (teola.server.openai.errors); a prompt
  longer than the model's context window is a 400 `context_length_exceeded`, as OpenAI answers it.
- A client that disconnects cancels its call, streamed or not: withdrawn from the queue, or
  aborted on the engine (counted in teola_server_queries_cancelled).
- Each call is a query in /metrics (teola_server_queries and the latency histograms, by app), an
  entry of kind "openai" in the /ui recent list, and an OpenTelemetry span (`chat {model}`; when
  telemetry is on, teola.telemetry) inside the caller's trace when it sends a W3C traceparent.
"""

from __future__ import annotations

import asyncio
import functools
import json
import uuid
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse, StreamingResponse

import teola.server.openai.format as fmt
import teola.server.openai.models as door_models
import teola.server.openai.replies as replies
from teola.runtime import CallFailed
from teola.server.errors import ApiError
from teola.server.openai.call_plan import plan_call, tool_calls_of
from teola.server.openai.calls import DoorCall
from teola.server.openai.embeddings import embedding_engines, embeddings
from teola.server.openai.errors import OpenAIErrorResponse
from teola.server.openai.stream import Answer, Spend, call_error, stream_answer
from teola.server.openai.tools import ForcedCall, offered_tools
from teola.server.quotas import call_tokens, estimate_tokens
from teola.server.state import ServerState
from teola.server.streaming import unless_disconnected
from teola.server.tracing import caller_context

_ERRORS = {status: {"model": OpenAIErrorResponse} for status in (400, 401, 404, 413, 415, 429, 500, 502, 503)}
_ANSWER = {
    200: {
        "description": "an OpenAI response object, or server-sent chunks when stream is true",
        "content": {"application/json": {"schema": {"type": "object"}}, "text/event-stream": {}},
    }
}
_COMMON = {
    "model": {"type": "string"},
    "stream": {"type": "boolean"},
    "max_tokens": {"type": "integer"},
    "temperature": {"type": "number"},
    "stop": {},
    "user": {"type": "string"},
    "seed": {"type": "integer"},
    "stream_options": {"type": "object"},
    "top_p": {"type": "number"},
    "n": {"type": "integer"},
    "presence_penalty": {"type": "number"},
    "frequency_penalty": {"type": "number"},
}
_CHAT = {
    "tools": {"type": "array", "items": {"type": "object"}},
    "tool_choice": {},
    "parallel_tool_calls": {"type": "boolean"},
    "response_format": {"type": "object"},
    "max_completion_tokens": {"type": "integer"},
}
_EMBEDDINGS_BODY = {
    "requestBody": {
        "required": True,
        "content": {
            "application/json": {
                "schema": {
                    "type": "object",
                    "required": ["model", "input"],
                    "properties": {
                        "model": {"type": "string"},
                        "input": {},
                        "encoding_format": {"type": "string"},
                        "dimensions": {"type": "integer"},
                        "user": {"type": "string"},
                    },
                }
            }
        },
    }
}


def _body_schema(
    required: str, schema: dict[str, Any], extra: dict[str, Any] | None = None
) -> dict[str, Any]:
    return {
        "requestBody": {
            "required": True,
            "content": {
                "application/json": {
                    "schema": {
                        "type": "object",
                        "required": ["model", required],
                        "properties": {**_COMMON, **(extra or {}), required: schema},
                    }
                }
            },
        }
    }


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

    @api.get("/v1/models", summary="The LLM and embedding engines served through the OpenAI-compatible API")
    async def models() -> dict[str, Any]:
        ids = [
            f"{name}/{engine}"
            for name, app in sorted(state.apps.items())
            for engine in _llm_engines(app) + embedding_engines(app)
        ]
        return {"object": "list", "data": [{"id": i, "object": "model", "owned_by": "teola"} for i in ids]}

    @api.post(
        "/v1/chat/completions",
        summary="OpenAI-compatible chat completion (one program call)",
        responses=_ANSWER,
        openapi_extra=_body_schema("messages", {"type": "array", "items": {"type": "object"}}, _CHAT),
    )
    async def chat(request: Request) -> Any:
        body = await _json(request)
        fmt.check_fields(body, chat=True)
        messages = fmt.chat_messages(body.get("messages"))
        tools, parallel, forced = offered_tools(body)
        prompt = {"parts": fmt.chat_parts(messages), "messages": messages, "tools": tools}
        return await _serve(
            state, clock, request, body, prompt, parallel if tools and not forced else None, forced
        )

    @api.post(
        "/v1/completions",
        summary="OpenAI-compatible completion (one program call)",
        responses=_ANSWER,
        openapi_extra=_body_schema("prompt", {"type": "string"}),
    )
    async def completions(request: Request) -> Any:
        body = await _json(request)
        fmt.check_fields(body, chat=False)
        text = fmt.completion_prompt(body.get("prompt"))
        return await _serve(
            state, clock, request, body, {"parts": [["user", text]], "raw_prompt": text}, None
        )

    @api.post(
        "/v1/embeddings",
        summary="OpenAI-compatible embeddings (one query of one embedding primitive)",
        openapi_extra=_EMBEDDINGS_BODY,
    )
    async def embed(request: Request) -> Any:
        return await embeddings(state, request, await _json(request))

    return api


async def _json(request: Request) -> dict[str, Any]:
    """The request's JSON object. Only ``Content-Type: application/json`` is read: a web page can
    send a cross-site text/plain or form POST without asking, but not a JSON one."""
    ctype = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if ctype != "application/json":
        raise ApiError(
            415,
            "unsupported_media_type",
            f"the body must be sent with Content-Type: application/json, got {ctype or 'none'!r:.80}",
        )
    try:
        body = json.loads(await request.body())
    except ValueError as exc:
        raise ApiError(400, "invalid_json", f"the body is not JSON: {exc}") from None
    except RecursionError:
        raise ApiError(400, "invalid_json", "the body is JSON nested too deeply") from None
    if not isinstance(body, dict):
        raise ApiError(400, "invalid_request", "the body must be a JSON object")
    return body


def _llm_engines(app: Any) -> list[str]:
    return door_models.engines_running(app, "decoding")


async def _serve(
    state: ServerState,
    clock: ProgramClock,
    request: Request,
    body: dict[str, Any],
    prompt: dict[str, Any],
    parallel: bool | None,
    forced: ForcedCall | None = None,
) -> Any:
    """One call. `prompt`: its prompt fields (parts, and messages with tools or raw_prompt);
    `parallel`: None when no tool calls are parsed from the text, else whether several may come
    back; `forced`: the tool call tool_choice forces, decoded under structured outputs."""
    plan = await plan_call(state, request, body, prompt, forced)
    runtime = plan.app.runtime
    # a cancelled call that already runs is aborted on the engine by it
    submit = functools.partial(plan.submit, f"door-{uuid.uuid4().hex}")
    headers = {"x-teola-call": header_value(plan.call_id), "x-teola-program": header_value(plan.pid)}
    state.metrics.queries.labels(plan.app_name).inc()
    slot = request.state.slot  # admitted before the body was read (teola.server.quotas.AdmissionMiddleware)
    seen = plan.observed(state, caller_context(request))

    def done() -> None:
        clock.end(runtime, plan.pid) if plan.ends else clock.touch(runtime, plan.pid)

    clock.busy(plan.pid)
    prompt_tokens = estimate_tokens("\n".join(text for _, text in prompt["parts"]))  # charged if cut short
    max_tokens = plan.gen["max_tokens"]
    if body.get("stream"):
        answer = Answer(plan.chat, plan.call_id, plan.model, max_tokens, parallel, forced)
        stream = stream_answer(
            submit, done, Spend(slot, prompt_tokens), seen, answer, bool(plan.options.get("include_usage"))
        )
        return StreamingResponse(
            stream, media_type="text/event-stream", headers={**headers, "Cache-Control": "no-cache"}
        )
    outcome = await _whole(state, plan.app_name, request, submit, done, seen, prompt_tokens + max_tokens)
    slot.charge(call_tokens(outcome.result))
    result = outcome.result
    tools = tool_calls_of(result.get("text", ""), parallel, forced)
    return JSONResponse(
        replies.response(plan.chat, plan.call_id, plan.model, result, max_tokens, tools), headers=headers
    )


async def _whole(
    state: ServerState,
    app_name: str,
    request: Request,
    submit: Callable[[], Any],
    done: Callable[[], None],
    seen: DoorCall,
    bound: int,
) -> Any:
    """The outcome of a call answered whole. A failure is recorded on `seen`; a call cut short is
    charged `bound` tokens (its prompt estimate and max_tokens: the engine's count is lost)."""
    slot = request.state.slot
    try:
        outcome = await unless_disconnected(state, app_name, request, submit())
    except CallFailed as exc:
        seen.failed(exc, "engine")
        raise call_error(exc) from None
    except BaseException as exc:  # the client went away (ApiError 499), the handler was cancelled, a bug
        seen.failed(exc, "internal" if isinstance(exc, Exception) and not isinstance(exc, ApiError) else None)
        slot.charge(bound)  # cut short: the engine's count is lost, so its bound
        raise
    finally:
        done()
    seen.finished(outcome)
    return outcome


def header_value(text: str) -> str:
    """`text` as an HTTP header value: characters outside printable ASCII (a program id "Zoë")
    percent-encoded (UTF-8), as Latin-1 headers cannot carry them."""
    return quote(text, safe="".join(chr(c) for c in range(0x21, 0x7F) if chr(c) != "%"))
