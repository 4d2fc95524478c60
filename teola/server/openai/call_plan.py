"""What the OpenAI-compatible door (teola.server.openai.door) decides about one call before it runs
it, as a `CallPlan`: its app and LLM engine, generation options, program, call and parent ids,
stream options and the engine request, each checked (a 400 names the field or the capability the
engine lacks); and the tool calls read back from an answer."""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from fastapi import Request

import teola.server.openai.format as fmt
import teola.server.openai.models as door_models
from engines.protocol import Feature
from teola.runtime import llm_request
from teola.server.errors import ApiError
from teola.server.openai.calls import DoorCall
from teola.server.openai.tools import ForcedCall, parse_tool_calls
from teola.server.state import ServerState

_call_ids = itertools.count(1)
SAMPLING = (
    "seed",
    "top_p",
    "presence_penalty",
    "frequency_penalty",
    "json_object",
    "json_schema",
    "logprobs",
)


@dataclass(kw_only=True)
class CallPlan:
    """One door call, checked and built, before it runs. `pid`: its program id in the policy
    ("<tenant>/<id>"); `ends`: the program ends after it; `call`: its LLM request; `shown`: what
    the /ui list shows of it."""

    chat: bool
    app_name: str
    app: Any
    engine: str
    gen: dict[str, Any]
    pid: str
    ends: bool
    call_id: str
    parents: list[str] | None
    options: dict[str, Any]
    tenant: str
    call: dict[str, Any]
    model: str
    shown: str

    def submit(self, abort_key: str, on_delta: Callable[[str], None] | None = None) -> Any:
        """Queue the call on its engine's scheduler (`abort_key`: what aborts it on the engine once it
        runs; `on_delta`: called with each piece of streamed text)."""
        return self.app.runtime.submit_call(
            self.engine,
            self.call,
            program=self.pid,
            call_id=self.call_id,
            parents=self.parents,
            on_delta=on_delta,
            tenant=self.tenant,
            abort_key=abort_key,
        )

    def observed(self, state: ServerState, parent: Any) -> DoorCall:
        """What the server records of the call from now on (`parent`: the caller's trace context)."""
        return DoorCall(
            state,
            self.app_name,
            self.app,
            self.engine,
            self.call_id,
            self.pid,
            self.tenant,
            self.call,
            "chat" if self.chat else "text_completion",
            parent,
            self.shown,
        )


async def plan_call(
    state: ServerState,
    request: Request,
    body: dict[str, Any],
    prompt: dict[str, Any],
    forced: ForcedCall | None,
) -> CallPlan:
    """The plan of a call with these prompt fields (its app started if it was not yet)."""
    app_name, app, engine = door_models.resolve(state, body.get("model"), "decoding", "llm", "engine")
    gen = generation_of(body, forced)
    pid, ends, call_id, parents = program_of(request, body)
    options = body.get("stream_options") or {}
    if not isinstance(options, dict):
        raise ApiError(
            400,
            "invalid_value",
            f"stream_options must be an object, got {options!r:.80}",
            param="stream_options",
        )
    if app.runtime is None:
        await app.start()
    _check_features(
        app.runtime.features(engine), gen, app_name, engine, "tool_choice" if forced else "response_format"
    )
    tenant = request.state.tenant
    call = _engine_request(state, tenant, prompt, gen, bool(body.get("stream")))
    return CallPlan(
        chat="messages" in prompt,
        app_name=app_name,
        app=app,
        engine=engine,
        gen=gen,
        pid=pid,
        ends=ends,
        call_id=call_id,
        parents=parents,
        options=options,
        tenant=tenant,
        call=call,
        model=body["model"],
        shown=_shown(prompt),
    )


def program_of(request: Request, body: dict[str, Any]) -> tuple[str, bool, str, list[str] | None]:
    """(program id, whether it ends after this call, call id, parent call ids) of a request."""
    tenant = getattr(request.state, "tenant", "default")
    given = request.headers.get("x-teola-program") or body.get("user")
    if given is not None and (not isinstance(given, str) or not given.strip()):
        raise ApiError(
            400,
            "invalid_value",
            f"the program id (x-teola-program or user) must be a non-empty string, got {given!r}",
            param="user",
        )
    ends = request.headers.get("x-teola-program-end", "").lower() in ("1", "true", "yes") or given is None
    pid = f"{tenant}/{given.strip() if given else 'call-' + uuid.uuid4().hex[:12]}"
    call_id = request.headers.get("x-teola-call") or f"call-{next(_call_ids)}"
    header = request.headers.get("x-teola-parent")
    parents = [p.strip() for p in header.split(",") if p.strip()] if header is not None else None
    return pid, ends, call_id, parents


def generation_of(body: dict[str, Any], forced: ForcedCall | None) -> dict[str, Any]:
    """A call's generation options (teola.server.openai.format.generation); a forced tool call
    constrains the output to its arguments' schema."""
    gen = fmt.generation(body)
    if forced is not None:
        if fmt.constrained(gen):
            raise ApiError(
                400,
                "invalid_value",
                "a request forcing a tool call (tool_choice) cannot also set a JSON "
                "response_format: the call's arguments are the JSON",
                param="response_format",
            )
        gen["json_schema"] = forced.schema
    return gen


def tool_calls_of(
    text: str, parallel: bool | None, forced: ForcedCall | None
) -> tuple[str, list[dict[str, Any]]] | None:
    """(the text outside tool calls, the calls) of an answer to a request offering tools, else None."""
    if forced is not None and (calls := forced.calls(text)):
        return "", calls
    return parse_tool_calls(text, parallel) if parallel is not None else None


def _check_features(
    has: frozenset[Feature], gen: dict[str, Any], app: str, engine: str, structured: str
) -> None:
    """400 naming the capability a call needs that its engine does not declare (and the field that
    asks for it: `structured` for structured outputs)."""
    needs = {Feature.STRUCTURED_OUTPUTS: structured} if fmt.constrained(gen) else {}
    if gen.get("logprobs") is not None:
        needs[Feature.LOGPROBS] = "logprobs"
    for feature, param in needs.items():
        if feature not in has:
            raise ApiError(
                400,
                "unsupported_value",
                f"{param} needs {feature}, which engine {engine!r} of app "
                f"{app!r} does not provide (in-process vLLM and vLLM servers do)",
                param=param,
            )


def _engine_request(
    state: ServerState, tenant: str, prompt: dict[str, Any], gen: dict[str, Any], stream: bool
) -> dict[str, Any]:
    """The LLM request body of a call, built whole: its prompt fields, generation options, the
    tenant's prefix-cache salt (with several tenants) and "stream_text" for a streamed answer."""
    return {
        **llm_request(prompt["parts"], True, gen),
        **{k: v for k, v in prompt.items() if k != "parts" and v is not None},
        **{k: gen[k] for k in SAMPLING if k in gen},
        **({"cache_salt": state.tenants.salt(tenant)} if state.tenants.several else {}),
        **({"stream_text": True} if stream else {}),
    }


def _shown(prompt: dict[str, Any]) -> str:
    """What the /ui list shows of a call: its raw prompt, or its conversation's last user or tool message."""
    messages = prompt.get("messages") or []
    return prompt.get("raw_prompt") or next(
        (m["content"] for m in reversed(messages) if m["role"] in ("user", "tool")), ""
    )
