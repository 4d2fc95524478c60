"""The HTTP server: `create_server(apps, settings)` returns a FastAPI application serving teola apps.

Endpoints (JSON unless noted; every error is ``{"error": code, "detail": message}``):

- ``POST /v1/apps/{app}/query``  ``{"query": {...}, "config": {...}, "stream": false}`` ->
  ``{"output", "trace", "query_id", "latency"}``; with ``"stream": true`` a text/event-stream of
  ``started``, ``progress`` (primitive started/finished), ``token`` (the answer as it decodes),
  ``answer``, ``trace`` and ``done`` events (``error`` on failure; teola.server.streaming).
  A client that disconnects cancels its query (engine work dropped, vLLM requests aborted).
  A W3C ``traceparent`` header puts the query's OpenTelemetry spans in the caller's trace
  (teola.server.tracing; here and on the OpenAI-compatible door).
- ``POST /v1/apps/{app}/documents`` (multipart files, JSON ``{"documents": [...]}`` or text/plain) ->
  ``{"document_ids": [...]}`` (201 once stored), usable as ``query.document_ids``. Ids are derived
  from the text (the same text twice: the same id, stored once). Stored in PostgreSQL by default
  (setting ``documents``), so they survive restarts; per-tenant caps on documents and bytes refuse an
  upload whole with 429. ``GET /v1/apps/{app}/documents?limit=&after=`` (id, bytes, created; the
  tenant's usage and caps), ``GET /v1/apps/{app}/documents/{id}`` (text/plain: the text as uploaded),
  ``DELETE /v1/apps/{app}/documents/{id}`` (teola.server.store.routes).
- ``GET /v1/apps/{app}/namespaces``: the namespaces kept with ``config.namespace`` (recorded by the
  first query using one; a per-tenant cap answers 429 before such a query runs);
  ``DELETE /v1/apps/{app}/namespaces/{namespace}`` drops one and its record.
  Documents and namespaces belong to the caller's tenant (teola.server.tenants): other tenants get 404.
- ``GET /v1/apps``; ``GET /v1/apps/{app}/config_schema`` (the JSON schema of the app's ``config.nodes``
  and ``config.passes``: every option typed and bounded);
  ``GET /v1/apps/{app}/graph?format=text|dot|mermaid&graph=egraph|pgraph`` (text/plain).
- ``POST /v1/chat/completions``, ``POST /v1/completions``, ``GET /v1/models``: the OpenAI-compatible
  door for agent code, one program call per request (teola.server.openai.door); its errors are
  OpenAI's error object ``{"error": {"message", "type", "param", "code"}}`` with OpenAI's status
  codes (teola.server.openai.errors).
- ``GET /healthz`` (process up), ``GET /readyz`` (engines started; 503 otherwise),
  ``GET /metrics`` (Prometheus text). OpenAPI at ``/openapi.json`` and ``/docs``.

Status codes: 400 malformed JSON, a Host not served (teola.server.hosts) or several Authorization
headers; 401 missing/wrong API key (checked before the body is read: teola.server.auth); 404 unknown app
or document id; 408 a body not received within ``body_timeout``; 413 body, document count or document
size over the limits; 415 an unsupported upload type or a door request not sent as JSON; 422 invalid
fields, unknown config keys, unknown pass or policy, a policy other than the running one (unless
allow_policy_switch); 429 over a per-tenant cap (``quota_exceeded``, ``too_many_queries``,
``token_rate_exceeded``; with ``Retry-After``; teola.server.quotas); 502 an engine failed (the message
names the primitive and engine); 503 an engine instance the query ran on went down (it is being
restarted; ``Retry-After``), or every compile thread busy (``compile_busy``); 500 any other failure; 504
the query ran past its time limit; 499 (logged only) the client disconnected and its query was
cancelled.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from typing import Any

from fastapi import APIRouter, Depends, FastAPI, Request
from fastapi.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse

from teola.api.shared_engines import share_engines
from teola.compile.config_schema import nodes_schema, passes_schema
from teola.server.auth import KeyMiddleware, unauthorized
from teola.server.errors import ApiError, BodyLimitMiddleware, install_error_handlers
from teola.server.hosts import AllowedHosts, HostMiddleware, is_loopback
from teola.server.memory import limit_malloc_arenas
from teola.server.openai.door import openai_router
from teola.server.queries import (
    build_query,
    check_graph,
    check_policy,
    compile_query,
    plain,
    run_query,
    tenant_config,
)
from teola.server.quotas import AdmissionMiddleware
from teola.server.schemas import ErrorResponse, QueryRequest, QueryResponse
from teola.server.settings import ServerSettings
from teola.server.state import ServerState
from teola.server.store.routes import add_storage_routes
from teola.server.streaming import sse_events, unless_disconnected
from teola.server.tracing import caller_context, in_context
from teola.server.ui import add_ui

log = logging.getLogger("teola.server")

GRAPH_FORMATS = ("text", "dot", "mermaid")
APP_METHODS = ("compile", "execute", "start", "stop")
_ERRORS = {
    status: {"model": ErrorResponse} for status in (400, 401, 404, 413, 415, 422, 429, 500, 502, 503, 504)
}
# text/plain answers; the route's default (JSON) media type stays, so its errors are documented as JSON
_TEXT_200 = {200: {"description": "text", "content": {"text/plain": {"schema": {"type": "string"}}}}}


def create_server(
    apps: Mapping[str, Any],
    settings: ServerSettings | None = None,
    progress: Callable[[str], None] | None = None,
    host: str | None = None,
) -> FastAPI:
    """A FastAPI application serving `apps` (URL name -> teola App).

    Engines of every app start in the server's lifespan start-up (unless
    ``settings.start_engines`` is False) and stop at shutdown. `progress`, if given, receives one line
    per start-up/shutdown step (the CLI prints them). `settings` defaults to `ServerSettings.from_env()`.
    `host`, the address the server will bind, if given: a name there is served (Host allow-list,
    teola.server.hosts), and binding beyond loopback without any API key is warned about loudly.
    """
    if not isinstance(apps, Mapping) or not apps:
        raise ValueError("create_server needs a non-empty dict {app name: App}")
    for name, app in apps.items():
        missing = [m for m in APP_METHODS if not callable(getattr(app, m, None))]
        if missing:
            raise TypeError(f"create_server: {name!r} is not a teola App (it lacks {missing})")
    settings = settings if settings is not None else ServerSettings.from_env()
    if settings.malloc_arenas:
        limit_malloc_arenas(settings.malloc_arenas)
    state = ServerState(apps, settings)
    if state.tenant_shares:
        _share_tenants(state)
    if host is not None and not is_loopback(host) and state.tenants.open:
        _warn_open(host, progress)
    say = progress or (lambda msg: log.info("%s", msg))
    server = FastAPI(
        title="teola",
        version=_version(),
        lifespan=_lifespan(state, say),
        description="Serve LLM apps as optimized primitive-level dataflow graphs.",
    )
    server.state.teola = state
    install_error_handlers(server)
    # the last added runs first: Host, then the key, then the tenant's admission, all before the body is read
    server.add_middleware(BodyLimitMiddleware, limit=settings.max_body_bytes, timeout=settings.body_timeout)
    server.add_middleware(AdmissionMiddleware, state=state)
    server.add_middleware(KeyMiddleware, tenants=state.tenants)
    server.add_middleware(HostMiddleware, allowed=AllowedHosts(settings.allowed_hosts, host))
    server.include_router(_probes(state))
    api = APIRouter(dependencies=[Depends(_key_check(state))], responses=_ERRORS)
    _add_app_routes(api, state)
    _add_query_routes(api, state)
    add_storage_routes(api, state)
    server.include_router(api)
    add_ui(server, state, _key_check(state))
    server.include_router(openai_router(state, _key_check(state)))
    return server


def _warn_open(host: str, progress: Callable[[str], None] | None) -> None:
    """Binding beyond loopback with no API key serves every query and document to anyone."""
    message = (
        f"WARNING: binding {host} serves beyond this machine WITHOUT ANY API KEY: anyone who reaches "
        "the port can run queries and read the recent ones and every document. Set TEOLA_API_KEY or "
        "TEOLA_API_KEYS (or --api-key), or bind 127.0.0.1."
    )
    log.warning("%s", message)
    if progress is not None:
        progress(message)


def _lifespan(state: ServerState, say: Callable[[str], None]) -> Callable[[FastAPI], Any]:
    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        try:
            n_shared = share_engines(state.apps.values())
            if n_shared:
                say(f"{n_shared} engine(s) shared by several apps (same kind and options): loaded once")
            if state.settings.start_engines:
                for name, app in state.apps.items():
                    say(f"starting engines of app {name!r} ({', '.join(app.engines) or 'none'}) ...")
                    t0 = time.perf_counter()
                    await app.start()
                    say(f"app {name!r} ready in {time.perf_counter() - t0:.1f}s")
            state.started = True
            yield
        finally:
            state.started = False
            try:
                await _stop_all(state, say)
            finally:
                state.compiler.close()
                await state.store.close()  # releases the PostgreSQL the documents were kept in

    return lifespan


def _share_tenants(state: ServerState) -> None:
    """Every app's engines queue tenants by the server's tenant_shares (started or not yet)."""
    for app in state.apps.values():
        if getattr(app, "runtime", None) is not None:
            app.runtime.set_tenant_shares(state.tenant_shares)
        else:
            app.config["runtime"] = {**app.config.get("runtime", {}), "tenant_shares": state.tenant_shares}


def _key_check(state: ServerState) -> Callable[[Request], None]:
    """Authenticate the caller and put its tenant in ``request.state.tenant``."""

    def check_key(request: Request) -> None:
        tenant = state.tenants.caller(request.headers.get("authorization", ""))
        if tenant is None:
            raise unauthorized()
        request.state.tenant = tenant

    return check_key


def _probes(state: ServerState) -> APIRouter:
    """The unauthenticated liveness and readiness probes."""
    public = APIRouter()

    @public.get("/healthz", summary="Liveness: the process answers")
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @public.get(
        "/readyz",
        summary="Readiness: every app's engines are started and healthy",
        responses={503: {"description": "engines not started yet, or an engine is down and restarting"}},
    )
    async def readyz() -> JSONResponse:
        status = {
            name: app.runtime is not None or not state.settings.start_engines
            for name, app in state.apps.items()
        }
        down = {
            f"{name}.{engine}": info["down"]
            for name, app in state.apps.items()
            if app.runtime is not None
            for engine, info in app.runtime.health().items()
            if info["down"]
        }
        ready = state.started and all(status.values()) and not down
        body: dict[str, Any] = {
            "status": "ready" if ready else "down" if down else "starting",
            "apps": status,
        }
        if down:
            body["down"] = down
            body["detail"] = "engine(s) down and restarting: " + ", ".join(sorted(down))
        return JSONResponse(body, status_code=200 if ready else 503)

    return public


def _add_app_routes(api: APIRouter, state: ServerState) -> None:
    """/metrics, the app list and an app's graph."""

    @api.get("/metrics", summary="Prometheus metrics", responses=_TEXT_200)
    async def metrics() -> Response:
        from prometheus_client import CONTENT_TYPE_LATEST

        return Response(state.metrics.exposition(), media_type=CONTENT_TYPE_LATEST)

    @api.get("/v1/apps", summary="The apps served here")
    async def list_apps() -> dict[str, Any]:
        return {"apps": [_describe(name, app) for name, app in sorted(state.apps.items())]}

    @api.get("/v1/apps/{app}/config_schema", summary="The JSON schema of an app's query config")
    async def config_schema(app: str) -> dict[str, Any]:
        target = state.app(app)
        return {"app": app, "nodes": nodes_schema(target.nodes), "passes": passes_schema()}

    @api.get("/v1/apps/{app}/graph", summary="An app's graph for a sample query", responses=_TEXT_200)
    async def graph(app: str, format: str = "text", graph: str = "egraph") -> PlainTextResponse:
        target = state.app(app)
        if format not in GRAPH_FORMATS:
            raise ApiError(
                422,
                "invalid_format",
                f"unknown graph format {format!r}; use one of {', '.join(GRAPH_FORMATS)}",
            )
        if graph not in ("egraph", "pgraph"):
            raise ApiError(422, "invalid_graph", f"unknown graph {graph!r}; use egraph (optimized) or pgraph")
        g = getattr(target.compile(target.placeholder_query()), graph)
        return PlainTextResponse({"text": g.to_text, "dot": g.to_dot, "mermaid": g.to_mermaid}[format]())


def _add_query_routes(api: APIRouter, state: ServerState) -> None:
    """Queries."""

    @api.post(
        "/v1/apps/{app}/query",
        summary="Run one query",
        response_model=QueryResponse,
        responses={
            200: {
                "content": {"text/event-stream": {}},
                "description": "JSON, or server-sent events when stream is true",
            }
        },
    )
    async def query(body: QueryRequest, app: str, request: Request) -> Any:
        target = state.app(app)
        state.metrics.queries.labels(app).inc()
        started = time.monotonic()
        tenant = request.state.tenant
        slot = (
            request.state.slot
        )  # admitted before the body was read (teola.server.quotas.AdmissionMiddleware)
        try:
            config = body.config.to_dict()
            limit = min(state.settings.query_timeout, config.get("timeout") or math.inf)
            check_policy(state.settings, target, config)
            tenant_config(state, tenant, config)
            await state.namespaces.claim(tenant, app, body.config.namespace)
            query = await build_query(state, app, body.query, tenant)
            compiled = await compile_query(state.compiler, target, query, config, limit, tenant, slot)
            check_graph(state.settings, compiled)
            await state.namespaces.charge(tenant, app, body.config.namespace, compiled)
        except ApiError as exc:
            state.metrics.failed.labels(app, "timeout" if exc.status == 504 else "invalid").inc()
            raise
        # compilation counts against the limit; the runtime enforces the rest (QueryTimeout) and
        # run_query keeps a backstop
        limit = max(0.001, limit - (time.monotonic() - started))
        config["timeout"] = limit
        state.recent.begin(tenant, app, compiled)
        if body.stream:
            return StreamingResponse(
                sse_events(state, app, target, compiled, config, limit, slot, caller_context(request)),
                media_type="text/event-stream",
                headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
            )
        work = run_query(state, app, target, compiled, config, limit, slot=slot)
        result = await unless_disconnected(state, app, request, in_context(caller_context(request), work))
        return JSONResponse(
            plain(
                {
                    "output": result.output,
                    "trace": result.trace,
                    "query_id": result.query_id,
                    "latency": result.latency,
                }
            )
        )


async def _stop_all(state: ServerState, say: Callable[[str], None]) -> None:
    """Stop every app's engines; a failure to stop one is logged and re-raised after the others stopped."""
    first: BaseException | None = None
    for name, app in reversed(list(state.apps.items())):
        if app.runtime is None:
            continue
        say(f"stopping engines of app {name!r} ...")
        try:
            await app.stop()
        except Exception as exc:
            log.exception("stopping app %s failed", name)
            first = first or exc
    if first is not None:
        raise first


def _describe(name: str, app: Any) -> dict[str, Any]:
    engines = getattr(app, "engines", {}) or {}
    return {
        "name": name,
        "engines": [{"name": e, "kind": getattr(spec, "kind", None)} for e, spec in engines.items()],
        "components": [getattr(n, "name", str(n)) for n in getattr(app, "nodes", [])],
        "ready": getattr(app, "runtime", None) is not None,
    }


def _version() -> str:
    from teola import __version__

    return __version__
