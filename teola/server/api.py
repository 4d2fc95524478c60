"""The HTTP server: `create_server(apps, settings)` returns a FastAPI application serving teola apps.

Endpoints (JSON unless noted; every error is ``{"error": code, "detail": message}``):

- ``POST /v1/apps/{app}/query``  ``{"query": {...}, "config": {...}, "stream": false}`` ->
  ``{"output", "trace", "query_id", "latency"}``; with ``"stream": true`` a text/event-stream of
  ``answer``, ``trace`` and ``done`` events (``error`` on failure).
- ``POST /v1/apps/{app}/documents`` (multipart files, JSON ``{"documents": [...]}`` or text/plain) ->
  ``{"document_ids": [...]}``, usable as ``query.document_ids``; ``DELETE /v1/apps/{app}/documents/{id}``.
- ``GET /v1/apps``; ``GET /v1/apps/{app}/graph?format=text|dot|mermaid&graph=egraph|pgraph`` (text/plain).
- ``GET /healthz`` (process up), ``GET /readyz`` (engines started; 503 otherwise),
  ``GET /metrics`` (Prometheus text). OpenAPI at ``/openapi.json`` and ``/docs``.

Status codes: 400 malformed JSON; 401 missing/wrong API key; 404 unknown app or document id;
413 body, document count or document size over the limits; 422 invalid fields, unknown config keys,
unknown pass or policy, a policy other than the running one (unless allow_policy_switch); 502 an engine failed (the message names the primitive and engine);
500 any other failure; 504 the query ran past its time limit.
"""
from __future__ import annotations

import asyncio
import json
import logging
import math
import secrets
import time
from contextlib import asynccontextmanager
from typing import Any, AsyncIterator, Callable, Mapping

from fastapi import APIRouter, Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from teola.engine_pool import share_engines
from teola.server.documents import DocumentStore
from teola.server.metrics import ServerMetrics
from teola.server.schemas import (CONFIG_KEYS, DocumentsResponse, ErrorResponse, QueryBody, QueryRequest,
                                  QueryResponse)
from teola.server.settings import ServerSettings

log = logging.getLogger("teola.server")

GRAPH_FORMATS = ("text", "dot", "mermaid")
_BACKSTOP_GRACE = 1.0  # seconds past the limit before the server itself cancels a query
_ERRORS = {status: {"model": ErrorResponse} for status in (400, 401, 404, 413, 422, 500, 502, 504)}


class ApiError(Exception):
    """An error answered as ``{"error": code, "detail": detail}`` with an HTTP status."""

    def __init__(self, status: int, code: str, detail: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(detail)
        self.status = status
        self.code = code
        self.detail = detail
        self.headers = headers


class ServerState:
    """What the endpoints share: the apps, the settings, metrics and uploaded documents."""

    def __init__(self, apps: Mapping[str, Any], settings: ServerSettings) -> None:
        self.apps = dict(apps)
        self.settings = settings
        self.metrics = ServerMetrics(lambda: self.apps)
        self.documents = DocumentStore(settings.max_stored_documents)
        self.started = False

    def app(self, name: str) -> Any:
        app = self.apps.get(name)
        if app is None:
            raise ApiError(404, "unknown_app", f"unknown app {name!r}; apps served here: {', '.join(sorted(self.apps)) or 'none'}")
        return app


def create_server(apps: Mapping[str, Any], settings: ServerSettings | None = None,
                  progress: Callable[[str], None] | None = None) -> FastAPI:
    """A FastAPI application serving `apps` (URL name -> teola App).

    Engines of every app start in the server's lifespan start-up (unless
    ``settings.start_engines`` is False) and stop at shutdown. `progress`, if given, receives one line
    per start-up/shutdown step (the CLI prints them). `settings` defaults to `ServerSettings.from_env()`.
    """
    if not isinstance(apps, Mapping) or not apps:
        raise ValueError("create_server needs a non-empty dict {app name: App}")
    for name, app in apps.items():
        missing = [m for m in ("compile", "run", "start", "stop") if not callable(getattr(app, m, None))]
        if missing:
            raise TypeError(f"create_server: {name!r} is not a teola App (it lacks {missing})")
    settings = settings if settings is not None else ServerSettings.from_env()
    state = ServerState(apps, settings)
    say = progress or (lambda msg: log.info("%s", msg))

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        try:
            n_shared = share_engines(state.apps.values())
            if n_shared:
                say(f"{n_shared} engine(s) shared by several apps (same kind and options): loaded once")
            if settings.start_engines:
                for name, app in state.apps.items():
                    engines = ", ".join(getattr(app, "engines", {}) or []) or "none"
                    say(f"starting engines of app {name!r} ({engines}) ...")
                    t0 = time.perf_counter()
                    await app.start()
                    say(f"app {name!r} ready in {time.perf_counter() - t0:.1f}s")
            state.started = True
            yield
        finally:
            state.started = False
            await _stop_all(state, say)

    server = FastAPI(title="teola", version=_version(), lifespan=lifespan,
                     description="Serve LLM apps as optimized primitive-level dataflow graphs.")
    server.state.teola = state
    _install_error_handlers(server)
    server.add_middleware(BodyLimitMiddleware, limit=settings.max_body_bytes)

    def check_key(request: Request) -> None:
        if settings.api_key is None:
            return
        header = request.headers.get("authorization", "")
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not secrets.compare_digest(token.strip().encode(), settings.api_key.encode()):
            raise ApiError(401, "unauthorized", "missing or wrong API key: send 'Authorization: Bearer <key>'",
                           headers={"WWW-Authenticate": "Bearer"})

    def get_app(app: str) -> Any:
        return state.app(app)

    public = APIRouter()
    api = APIRouter(dependencies=[Depends(check_key)], responses=_ERRORS)

    @public.get("/healthz", summary="Liveness: the process answers")
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @public.get("/readyz", summary="Readiness: every app's engines are started",
                responses={503: {"description": "engines not started yet"}})
    async def readyz() -> JSONResponse:
        status = {name: getattr(app, "runtime", None) is not None or not settings.start_engines
                  for name, app in state.apps.items()}
        ready = state.started and all(status.values())
        return JSONResponse({"status": "ready" if ready else "starting", "apps": status},
                            status_code=200 if ready else 503)

    @api.get("/metrics", summary="Prometheus metrics", response_class=PlainTextResponse)
    async def metrics() -> Response:
        from prometheus_client import CONTENT_TYPE_LATEST
        return Response(state.metrics.exposition(), media_type=CONTENT_TYPE_LATEST)

    @api.get("/v1/apps", summary="The apps served here")
    async def list_apps() -> dict[str, Any]:
        return {"apps": [_describe(name, app) for name, app in sorted(state.apps.items())]}

    @api.get("/v1/apps/{app}/graph", summary="An app's graph for a sample query", response_class=PlainTextResponse)
    async def graph(app: str, format: str = "text", graph: str = "egraph") -> PlainTextResponse:
        target = state.app(app)
        if format not in GRAPH_FORMATS:
            raise ApiError(422, "invalid_format", f"unknown graph format {format!r}; use one of {', '.join(GRAPH_FORMATS)}")
        if graph not in ("egraph", "pgraph"):
            raise ApiError(422, "invalid_graph", f"unknown graph {graph!r}; use egraph (optimized) or pgraph")
        compiled = target.compile(target.placeholder_query())
        g = getattr(compiled, graph)
        return PlainTextResponse({"text": g.to_text, "dot": g.to_dot, "mermaid": g.to_mermaid}[format]())

    @api.post("/v1/apps/{app}/query", summary="Run one query", response_model=QueryResponse,
              responses={200: {"content": {"text/event-stream": {}},
                               "description": "JSON, or server-sent events when stream is true"}})
    async def query(body: QueryRequest, app: str, target: Any = Depends(get_app)) -> Any:
        state.metrics.queries.labels(app).inc()
        try:
            q = _build_query(state, app, body.query)
            config = body.config.to_dict()
            _check_node_names(target, config)
            _check_policy(settings, target, config)
            try:
                target.compile(q, config)
            except (ValueError, TypeError) as exc:
                raise ApiError(422, "invalid_query", f"{type(exc).__name__}: {exc}") from exc
        except ApiError:
            state.metrics.failed.labels(app, "invalid").inc()
            raise
        limit = min(settings.query_timeout, config.get("timeout") or math.inf)
        config["timeout"] = limit  # the runtime enforces it (QueryTimeout); _run keeps a backstop
        if body.stream:
            return StreamingResponse(_sse(state, app, target, q, config, limit), media_type="text/event-stream",
                                     headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
        result = await _run(state, app, target, q, config, limit)
        return JSONResponse(_plain({"output": result.output, "trace": result.trace,
                                    "query_id": result.query_id, "latency": result.latency}))

    @api.post("/v1/apps/{app}/documents", summary="Upload documents", status_code=201,
              response_model=DocumentsResponse,
              openapi_extra={"requestBody": {"content": {
                  "multipart/form-data": {"schema": {"type": "object", "properties": {
                      "files": {"type": "array", "items": {"type": "string", "format": "binary"}}}}},
                  "application/json": {"schema": {"type": "object", "properties": {
                      "documents": {"type": "array", "items": {"type": "string"}}}, "required": ["documents"]}},
                  "text/plain": {"schema": {"type": "string"}}}}})
    async def upload(app: str, request: Request) -> JSONResponse:
        state.app(app)
        texts = await _read_documents(request)
        if not texts:
            raise ApiError(422, "no_documents", "no documents in the request body")
        _check_documents(settings, texts)
        ids = [state.documents.add(app, t) for t in texts]
        return JSONResponse({"document_ids": ids}, status_code=201)

    @api.delete("/v1/apps/{app}/documents/{doc_id}", summary="Forget an uploaded document", status_code=204)
    async def delete_document(app: str, doc_id: str) -> Response:
        state.app(app)
        if not state.documents.delete(app, doc_id):
            raise ApiError(404, "unknown_document", f"unknown document id {doc_id!r} for app {app!r}")
        return Response(status_code=204)

    server.include_router(public)
    server.include_router(api)
    return server


# ---- queries --------------------------------------------------------------------------------------
def _build_query(state: ServerState, app: str, body: QueryBody) -> dict[str, Any]:
    query = body.model_dump(exclude_none=True)
    ids = query.pop("document_ids", None)
    if ids:
        try:
            uploaded = state.documents.get_many(app, ids)
        except KeyError as exc:
            raise ApiError(404, "unknown_document", exc.args[0]) from None
        query["documents"] = list(query.get("documents", [])) + uploaded
    if "documents" in query:
        _check_documents(state.settings, query["documents"])
    return query


def _check_node_names(app: Any, config: dict[str, Any]) -> None:
    known = [getattr(n, "name", None) for n in getattr(app, "nodes", [])]
    unknown = sorted(set(config.get("nodes") or {}) - set(known))
    if unknown:
        raise ApiError(422, "invalid_query", f"config.nodes: unknown component(s) {', '.join(map(repr, unknown))}; "
                       f"this app's components: {', '.join(known)}")


def _check_policy(settings: ServerSettings, app: Any, config: dict[str, Any]) -> None:
    wanted = config.get("policy")
    running = getattr(getattr(app, "runtime", None), "policy", None)
    if running is None:  # engines not started yet: the policy they will start with
        from teola.runtime import DEFAULT_POLICY
        running = (getattr(app, "config", None) or {}).get("runtime", {}).get("policy") or DEFAULT_POLICY
    if wanted is None or settings.allow_policy_switch or wanted == running:
        return
    raise ApiError(422, "policy_switch_not_allowed",
                   f"config.policy {wanted!r}: this server runs the {running!r} batching policy for every "
                   "query on these engines, and a query may not switch it for everyone (server setting "
                   "allow_policy_switch, env TEOLA_ALLOW_POLICY_SWITCH=1)")


def _check_documents(settings: ServerSettings, docs: list[str]) -> None:
    if len(docs) > settings.max_documents:
        raise ApiError(413, "too_many_documents", f"{len(docs)} documents; at most {settings.max_documents} per "
                       "query (setting max_documents, env TEOLA_MAX_DOCUMENTS)")
    for i, doc in enumerate(docs):
        if len(doc) > settings.max_document_chars:
            raise ApiError(413, "document_too_large", f"document {i} has {len(doc)} characters; at most "
                           f"{settings.max_document_chars} (setting max_document_chars, env TEOLA_MAX_DOCUMENT_CHARS)")


async def _run(state: ServerState, name: str, app: Any, query: dict[str, Any], config: dict[str, Any],
               limit: float) -> Any:
    """Run one query under the time limit, turning failures into ApiErrors (and counting them)."""
    from teola.runtime import QueryError, QueryTimeout

    try:
        result = await asyncio.wait_for(app.run(query, config), timeout=limit + _BACKSTOP_GRACE)
    except (TimeoutError, QueryTimeout) as exc:
        state.metrics.failed.labels(name, "timeout").inc()
        detail = str(exc) or f"query exceeded its time limit of {limit:g}s"
        raise ApiError(504, "timeout", detail) from exc
    except QueryError as exc:
        state.metrics.failed.labels(name, "engine").inc()
        detail = str(exc)
        where = [f"{k} {v!r}" for k, v in (("primitive", exc.primitive), ("engine", exc.engine)) if v and str(v) not in detail]
        if where:
            detail += f" ({', '.join(where)})"
        log.warning("app %s query %s failed: %s", name, getattr(exc, "query_id", "?"), detail)
        raise ApiError(502 if exc.engine else 500, "query_failed", detail) from exc
    except Exception as exc:
        state.metrics.failed.labels(name, "internal").inc()
        log.exception("app %s: query failed", name)
        raise ApiError(500, "internal_error", f"{type(exc).__name__}: {exc}") from exc
    state.metrics.observe_query(name, result.latency, result.trace)
    return result


async def _sse(state: ServerState, name: str, app: Any, query: dict[str, Any], config: dict[str, Any],
               limit: float) -> AsyncIterator[bytes]:
    """Server-sent events for one query. The runtime has no token streaming through `App.run` yet, so
    the answer arrives in one ``answer`` event when the query finishes, then ``trace`` and ``done``."""
    try:
        result = await _run(state, name, app, query, config, limit)
    except ApiError as exc:
        yield _event("error", {"status": exc.status, "error": exc.code, "detail": exc.detail})
        return
    output = result.output
    yield _event("answer", {"text": output if isinstance(output, str) else None, "output": output})
    yield _event("trace", {"trace": result.trace, "query_id": result.query_id, "latency": result.latency})
    yield _event("done", {"query_id": result.query_id})


def _event(kind: str, data: Any) -> bytes:
    return f"event: {kind}\ndata: {json.dumps(_plain(data))}\n\n".encode()


async def _read_documents(request: Request) -> list[str]:
    ctype = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if ctype == "multipart/form-data":
        form = await request.form()
        texts = []
        for key, value in form.multi_items():
            if hasattr(value, "read"):
                raw = await value.read()
                try:
                    texts.append(raw.decode("utf-8"))
                except UnicodeDecodeError:
                    raise ApiError(422, "invalid_document", f"file {getattr(value, 'filename', key)!r} is not "
                                   "UTF-8 text") from None
            elif key in ("document", "documents"):
                texts.append(str(value))
        return texts
    raw = await request.body()
    if ctype in ("", "application/json"):
        try:
            data = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise ApiError(400, "malformed_json", f"malformed JSON body: {exc.msg} at position {exc.pos}") from None
        docs = data.get("documents") if isinstance(data, dict) else None
        if not isinstance(docs, list) or not all(isinstance(d, str) for d in docs):
            raise ApiError(422, "invalid_documents", 'body must be {"documents": ["text", ...]}')
        return docs
    if ctype.startswith("text/"):
        try:
            return [raw.decode("utf-8")]
        except UnicodeDecodeError:
            raise ApiError(422, "invalid_document", "body is not UTF-8 text") from None
    raise ApiError(415, "unsupported_media_type", f"unsupported content type {ctype!r}; send multipart/form-data, "
                   "application/json or text/plain")


# ---- errors ---------------------------------------------------------------------------------------
def _install_error_handlers(server: FastAPI) -> None:
    @server.exception_handler(ApiError)
    async def api_error(_: Request, exc: ApiError) -> JSONResponse:
        return JSONResponse({"error": exc.code, "detail": exc.detail}, status_code=exc.status, headers=exc.headers)

    @server.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        detail = exc.detail if isinstance(exc.detail, str) else json.dumps(exc.detail)
        if exc.status_code == 404 and detail == "Not Found":
            detail = f"no endpoint {request.method} {request.url.path}; see /docs"
        return JSONResponse({"error": "http_error", "detail": detail}, status_code=exc.status_code,
                            headers=getattr(exc, "headers", None))

    @server.exception_handler(RequestValidationError)
    async def invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        status, detail = _validation_message(exc.errors())
        return JSONResponse({"error": "malformed_json" if status == 400 else "invalid_request", "detail": detail},
                            status_code=status)


def _validation_message(errors: list[dict[str, Any]]) -> tuple[int, str]:
    messages: list[str] = []
    unknown_config: list[str] = []
    for e in errors:
        loc = [str(x) for x in e.get("loc", ()) if x != "body"]
        where = ".".join(loc) or "request body"
        kind = e.get("type", "")
        if kind == "json_invalid":
            reason = (e.get("ctx") or {}).get("error", "invalid JSON")
            pos = e.get("loc", ())[-1] if len(e.get("loc", ())) > 1 else "?"
            return 400, f"malformed JSON body: {reason} at position {pos}"
        if kind == "extra_forbidden" and len(loc) == 2 and loc[0] == "config":
            unknown_config.append(loc[1])
        elif kind == "extra_forbidden":
            messages.append(f"{where}: unknown field")
        elif where == "request body" and kind in ("model_attributes_type", "dict_type"):
            messages.append('request body must be a JSON object {"query": {"question": ...}, "config": {...}} '
                            "sent with Content-Type: application/json")
        elif kind == "missing":
            messages.append(f"{where}: field required" + (
                ' (send JSON {"query": {"question": ...}, "config": {...}})' if where == "request body" else ""))
        else:
            messages.append(f"{where}: {e.get('msg', kind)}")
    if unknown_config:
        messages.insert(0, f"unknown config key(s) {', '.join(repr(k) for k in unknown_config)}; "
                           f"known keys: {', '.join(CONFIG_KEYS)}")
    return 422, "; ".join(messages) or "invalid request"


class BodyLimitMiddleware:
    """Rejects request bodies over `limit` bytes with 413 before the app reads them (by
    Content-Length when given, else by counting the bytes received)."""

    def __init__(self, app: Any, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        length = dict(scope.get("headers") or []).get(b"content-length")
        if length is not None and length.isdigit() and int(length) > self.limit:
            await self._reject(send, int(length))
            return
        chunks, size = [], 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            body = message.get("body", b"")
            size += len(body)
            if size > self.limit:
                await self._reject(send, size)
                return
            chunks.append(body)
            if not message.get("more_body", False):
                break
        buffered = {"type": "http.request", "body": b"".join(chunks), "more_body": False}
        replayed = False

        async def replay() -> dict:
            nonlocal replayed
            if not replayed:
                replayed = True
                return buffered
            return await receive()

        await self.app(scope, replay, send)

    async def _reject(self, send: Callable, size: int) -> None:
        body = json.dumps({"error": "body_too_large", "detail": f"request body of {size}+ bytes exceeds the limit of "
                           f"{self.limit} bytes (setting max_body_bytes, env TEOLA_MAX_BODY_BYTES)"}).encode()
        await send({"type": "http.response.start", "status": 413,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})


# ---- helpers --------------------------------------------------------------------------------------
async def _stop_all(state: ServerState, say: Callable[[str], None]) -> None:
    """Stop every app's engines; a failure to stop one is logged and re-raised after the others stopped."""
    first: BaseException | None = None
    for name, app in reversed(list(state.apps.items())):
        if getattr(app, "runtime", None) is None:
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
    return {"name": name,
            "engines": [{"name": e, "kind": getattr(spec, "kind", None)} for e, spec in engines.items()],
            "components": [getattr(n, "name", str(n)) for n in getattr(app, "nodes", [])],
            "ready": getattr(app, "runtime", None) is not None}


def _plain(value: Any) -> Any:
    """`value` as JSON-compatible data (numpy scalars/arrays, tuples, sets and enums included)."""
    if value is None or isinstance(value, (str, bool, int)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_plain(v) for v in value]
    if hasattr(value, "tolist"):
        return _plain(value.tolist())
    if hasattr(value, "value") and type(value).__module__ != "builtins":
        return _plain(value.value)
    return str(value)


def _version() -> str:
    from teola import __version__
    return __version__
