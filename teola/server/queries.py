"""One query over HTTP: the query dict from the request (uploaded documents resolved, limits
checked), running it under its time limit with failures turned into `ApiError`s, server-sent
events, document uploads, and JSON-safe output."""

from __future__ import annotations

import asyncio
import json
import logging
import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from fastapi import Request

from teola.runtime import DEFAULT_POLICY, QueryError, QueryTimeout, QueryUnavailable
from teola.server.errors import ApiError
from teola.server.quotas import spent_tokens, trace_tokens
from teola.server.schemas import QueryBody
from teola.server.settings import ServerSettings
from teola.server.tenants import namespace_for

if TYPE_CHECKING:
    from teola.compile.compiler import Compiled
    from teola.server.compiling import CompilePool
    from teola.server.quotas import Slot
    from teola.server.state import ServerState

log = logging.getLogger("teola.server")

BACKSTOP_GRACE = 1.0  # seconds past the limit before the server itself cancels a query


async def build_query(state: ServerState, app: str, body: QueryBody, tenant: str) -> dict[str, Any]:
    """The query dict of a request: the tenant's uploaded `document_ids` resolved into documents,
    limits checked."""
    query = body.model_dump(exclude_none=True)
    ids = query.pop("document_ids", None)
    if ids:
        try:
            uploaded = await state.documents.get_many(tenant, app, ids)
        except KeyError as exc:
            raise ApiError(404, "unknown_document", exc.args[0]) from None
        query["documents"] = list(query.get("documents", [])) + uploaded
    for key, value in query.items():
        if isinstance(value, str):
            check_text(value, f"query.{key}")
    if "documents" in query:
        check_documents(state.settings, query["documents"])
    return query


def check_graph(settings: ServerSettings, compiled: Compiled) -> None:
    """413 when a query's optimized graph holds more primitives than the server runs for one query."""
    n = len(compiled.egraph.primitives)
    if n > settings.max_primitives:
        raise ApiError(
            413,
            "graph_too_large",
            f"the query compiles to {n} primitives; at most "
            f"{settings.max_primitives} per query (setting max_primitives, env TEOLA_MAX_PRIMITIVES): "
            "send fewer or smaller documents or smaller num_queries / top_k / top_n",
        )


async def compile_query(
    pool: CompilePool,
    app: Any,
    query: dict[str, Any],
    config: dict[str, Any],
    limit: float,
    tenant: str,
    slot: Slot | None = None,
) -> Compiled:
    """Compile once for the request, in one of the server's compile threads (teola.server.compiling,
    shared fairly by tenants) so the event loop (health checks, other queries) keeps running, within
    the query's time limit (504 past it; a compilation already running goes on in its thread and
    keeps the tenant's `slot` taken until it ends). A ValueError/TypeError (bad node config, unknown
    pass or node, ...) is the client's mistake: 422 naming it. 503 when the pool is full."""
    let_go = slot.hold() if slot is not None else None
    try:
        job = pool.submit(tenant, app.compile, query, config, on_end=let_go)
    except ApiError:
        if let_go is not None:
            let_go()
        raise
    try:
        return await asyncio.wait_for(asyncio.shield(job.future), timeout=limit)
    except asyncio.CancelledError:
        pool.withdraw(job)  # the client went away: a compilation still waiting never starts
        raise
    except TimeoutError as exc:
        pool.withdraw(job)  # a compilation still waiting for a thread never starts
        raise ApiError(
            504,
            "timeout",
            f"compiling the query took longer than its time limit of {limit:g}s; "
            "send fewer or smaller documents or smaller top_k / num_queries / top_n",
        ) from exc
    except (ValueError, TypeError) as exc:
        raise ApiError(422, "invalid_query", f"{type(exc).__name__}: {exc}") from exc


def tenant_config(state: ServerState, tenant: str, config: dict[str, Any]) -> None:
    """The tenant's view of a query's config: its `namespace` maps into the tenant's own space, the
    engines queue it as the tenant's (fair queuing), and with several tenants its prompts carry the
    tenant's prefix-cache salt."""
    config["tenant"] = tenant
    if config.get("namespace") is not None:
        config["namespace"] = namespace_for(tenant, config["namespace"])
    if state.tenants.several:
        config["cache_salt"] = state.tenants.salt(tenant)


def check_policy(settings: ServerSettings, app: Any, config: dict[str, Any]) -> None:
    """A query may not switch the engine-wide batching policy unless the server allows it."""
    wanted = config.get("policy")
    running = getattr(getattr(app, "runtime", None), "policy", None)
    if running is None:  # engines not started yet: the policy they will start with
        running = (getattr(app, "config", None) or {}).get("runtime", {}).get("policy") or DEFAULT_POLICY
    if wanted is None or settings.allow_policy_switch or wanted == running:
        return
    raise ApiError(
        422,
        "policy_switch_not_allowed",
        f"config.policy {wanted!r}: this server runs the {running!r} batching policy for every "
        "query on these engines, and a query may not switch it for everyone (server setting "
        "allow_policy_switch, env TEOLA_ALLOW_POLICY_SWITCH=1)",
    )


def check_documents(settings: ServerSettings, docs: list[str]) -> None:
    """413 when a request carries too many or too large documents."""
    if len(docs) > settings.max_documents:
        raise ApiError(
            413,
            "too_many_documents",
            f"{len(docs)} documents; at most {settings.max_documents} per "
            "query (setting max_documents, env TEOLA_MAX_DOCUMENTS)",
        )
    for i, doc in enumerate(docs):
        check_text(doc, f"document {i}")
        if len(doc) > settings.max_document_chars:
            raise ApiError(
                413,
                "document_too_large",
                f"document {i} has {len(doc)} characters; at most "
                f"{settings.max_document_chars} (setting max_document_chars, env TEOLA_MAX_DOCUMENT_CHARS)",
            )


def check_text(text: str, where: str) -> None:
    """422 for text no engine can take: NUL characters (PostgreSQL rejects them) and lone
    surrogates (not encodable as UTF-8)."""
    if "\x00" in text:
        raise ApiError(422, "invalid_text", f"{where} contains a NUL character (\\u0000); remove it")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ApiError(
            422,
            "invalid_text",
            f"{where} contains a lone surrogate at character {exc.start} "
            "(not valid UTF-8); send valid Unicode text",
        ) from None


async def run_query(
    state: ServerState,
    name: str,
    app: Any,
    compiled: Compiled,
    config: dict[str, Any],
    limit: float,
    on_event: Callable[[dict[str, Any]], None] | None = None,
    slot: Slot | None = None,
) -> Any:
    """Run one compiled query under the time limit, turning failures into ApiErrors (and counting them).
    `on_event` receives its progress and answer-token events (`Runtime.submit`). `slot`, the
    tenant's admission (teola.server.quotas, released when the response is sent), is charged the
    tokens the query spent, whatever way it ended."""
    work = asyncio.ensure_future(app.execute(compiled, config, on_event))
    try:
        try:
            result = await asyncio.wait_for(asyncio.shield(work), timeout=limit + BACKSTOP_GRACE)
        except BaseException as exc:  # recorded for the /ui page and charged, then handled below
            trace = getattr(exc, "trace", None) if work.done() else await _stop(app, compiled, work)
            state.recent.finish(compiled.query_id, error=exc)
            if slot is not None:
                slot.charge(spent_tokens(trace or [], compiled))
            raise
    except (TimeoutError, QueryTimeout) as exc:
        state.metrics.failed.labels(name, "timeout").inc()
        detail = str(exc) or f"query exceeded its time limit of {limit:g}s"
        raise ApiError(504, "timeout", detail) from exc
    except QueryUnavailable as exc:
        state.metrics.failed.labels(name, "unavailable").inc()
        raise ApiError(503, "engine_unavailable", str(exc), headers={"Retry-After": "10"}) from exc
    except QueryError as exc:
        state.metrics.failed.labels(name, "engine").inc()
        detail = str(exc)
        where = [
            f"{k} {v!r}"
            for k, v in (("primitive", exc.primitive), ("engine", exc.engine))
            if v and str(v) not in detail
        ]
        if where:
            detail += f" ({', '.join(where)})"
        log.warning("app %s query %s failed: %s", name, getattr(exc, "query_id", "?"), detail)
        raise ApiError(502 if exc.engine else 500, "query_failed", detail) from exc
    except Exception as exc:
        state.metrics.failed.labels(name, "internal").inc()
        log.exception("app %s: query failed", name)
        raise ApiError(500, "internal_error", f"{type(exc).__name__}: {exc}") from exc
    state.metrics.observe_query(name, result.latency, result.trace)
    state.recent.finish(compiled.query_id, result)
    if slot is not None:
        slot.charge(trace_tokens(result.trace))
    return result


async def _stop(app: Any, compiled: Compiled, work: asyncio.Future) -> list[dict[str, Any]]:
    """Stop a query cut short by its deadline or its client, as the runtime cancels one (queued work
    dropped, running LLM requests aborted), and return its trace: what ran, and so what it spent."""
    runtime = getattr(app, "runtime", None)
    if runtime is None or not runtime.cancel(compiled.query_id):
        work.cancel()  # not running in the runtime yet: nothing was spent
    await asyncio.wait({work})
    error = None if work.cancelled() else work.exception()
    return getattr(error, "trace", None) or []


async def read_documents(request: Request) -> list[str]:
    """The texts of a document upload: multipart files, JSON {"documents": [...]} or text/plain.
    Every malformed upload is a 4xx naming the problem: an empty body or document, bytes that are
    not UTF-8, JSON that is malformed, too deep or of another shape, an unsupported content type
    (the body's size is bounded before it is read: teola.server.errors.BodyLimitMiddleware)."""
    texts = await _read_documents(request)
    for i, text in enumerate(texts):
        if not text.strip():
            raise ApiError(422, "empty_document", f"document {i} is empty (or only whitespace)")
    return texts


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
                    raise ApiError(
                        422, "invalid_document", f"file {getattr(value, 'filename', key)!r} is not UTF-8 text"
                    ) from None
            elif key in ("document", "documents"):
                texts.append(str(value))
        return texts
    raw = await request.body()
    if not raw:
        raise ApiError(
            400,
            "empty_body",
            'the request body is empty; send {"documents": ["text", ...]}, a text/plain '
            "body or multipart files",
        )
    if ctype in ("", "application/json"):
        try:
            data = json.loads(raw.decode("utf-8"))  # strict: bytes that are not UTF-8 are the client's error
        except UnicodeDecodeError as exc:
            raise ApiError(
                400,
                "malformed_json",
                f"JSON body is not UTF-8: byte {exc.start} ({raw[exc.start : exc.start + 1]!r}) is invalid",
            ) from None
        except json.JSONDecodeError as exc:
            raise ApiError(
                400, "malformed_json", f"malformed JSON body: {exc.msg} at position {exc.pos}"
            ) from None
        except RecursionError:
            raise ApiError(
                400,
                "malformed_json",
                'JSON body is nested too deeply (a document upload is {"documents": ["text", ...]})',
            ) from None
        docs = data.get("documents") if isinstance(data, dict) else None
        if not isinstance(docs, list) or not all(isinstance(d, str) for d in docs):
            raise ApiError(422, "invalid_documents", 'body must be {"documents": ["text", ...]}')
        return docs
    if ctype.startswith("text/"):
        try:
            return [raw.decode("utf-8")]
        except UnicodeDecodeError:
            raise ApiError(422, "invalid_document", "body is not UTF-8 text") from None
    raise ApiError(
        415,
        "unsupported_media_type",
        f"unsupported content type {ctype!r}; send multipart/form-data, application/json or text/plain",
    )


def plain(value: Any) -> Any:
    """`value` as JSON-compatible data (numpy scalars/arrays, tuples, sets and enums included)."""
    if value is None or isinstance(value, (str, bool, int)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [plain(v) for v in value]
    if hasattr(value, "tolist"):
        return plain(value.tolist())
    if hasattr(value, "value") and type(value).__module__ != "builtins":
        return plain(value.value)
    return str(value)
