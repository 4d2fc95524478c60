"""The /ui page: a single HTML page with its own small script (no CDN, shipped in teola/server/static)
drawing the apps' optimized graphs, the engines' live queues, recent queries and one query's
timeline. The page itself is public (it holds no data); the JSON it reads sits under /v1/ui behind
the server's API keys, and each tenant sees only its own queries.

- ``GET /ui``, ``GET /ui/static/{file}``: the page and its script and style sheet.
- ``GET /v1/ui/queries``: the caller's recent queries (newest first).
- ``GET /v1/ui/queries/{query_id}``: one query: trace, e-graph parents, critical path, batch mates.
- ``GET /v1/ui/apps/{app}/graph``: the app's optimized graph for its placeholder query as nodes and edges.
- ``GET /v1/ui/apps/{app}/sample``: the app's sample query (what the page's Run button sends).
- ``GET /v1/ui/engines``: per app and engine: queued entries, batches in flight, capacity, health.
"""

from __future__ import annotations

from collections.abc import Callable
from importlib import resources
from typing import Any

from fastapi import APIRouter, Depends, FastAPI, Request
from fastapi.responses import HTMLResponse, Response

from teola.server.errors import ApiError
from teola.server.schemas import ErrorResponse
from teola.server.state import ServerState

STATIC = {"ui.js": "text/javascript", "ui.css": "text/css"}
_ERRORS = {status: {"model": ErrorResponse} for status in (401, 404, 422, 500)}


def add_ui(server: FastAPI, state: ServerState, key_check: Callable[[Request], None]) -> None:
    """Register the page (public) and its JSON endpoints (behind `key_check`) on `server`."""
    page = APIRouter(include_in_schema=False)

    @page.get("/ui")
    async def ui() -> HTMLResponse:
        return HTMLResponse(_asset("ui.html"), headers={"Cache-Control": "no-cache"})

    @page.get("/ui/static/{name}")
    async def static(name: str) -> Response:
        if name not in STATIC:
            raise ApiError(404, "not_found", f"no UI asset {name!r}")
        return Response(_asset(name), media_type=STATIC[name], headers={"Cache-Control": "no-cache"})

    api = APIRouter(prefix="/v1/ui", dependencies=[Depends(key_check)], tags=["ui"], responses=_ERRORS)
    _add_data_routes(api, state)
    server.include_router(page)
    server.include_router(api)


def _add_data_routes(api: APIRouter, state: ServerState) -> None:
    """The data the page shows: recent queries, apps' graphs and samples, live engines."""
    _add_query_routes(api, state)
    _add_app_routes(api, state)


def _add_query_routes(api: APIRouter, state: ServerState) -> None:
    """The caller's recent queries and one query's detail."""

    @api.get("/queries", summary="The caller's recent queries, newest first")
    async def queries(request: Request) -> dict[str, Any]:
        return {"queries": state.recent.listing(request.state.tenant)}

    @api.get("/queries/{query_id}", summary="One recent query with its timeline")
    async def query(query_id: str, request: Request) -> Any:
        from teola.server.queries import plain

        detail = state.recent.detail(request.state.tenant, query_id)
        if detail is None:
            raise ApiError(
                404,
                "unknown_query",
                f"no recent query {query_id!r} (the server keeps each tenant's last {state.recent.capacity})",
            )
        return plain(detail)


def _add_app_routes(api: APIRouter, state: ServerState) -> None:
    """An app's optimized graph and sample query; every app's engines, live."""

    @api.get("/apps/{app}/graph", summary="An app's optimized graph as nodes and edges")
    async def graph(app: str) -> dict[str, Any]:
        target = state.app(app)
        g = target.compile(target.placeholder_query()).egraph
        num = {p.id: i for i, p in enumerate(g.primitives)}
        return {
            "app": app,
            "nodes": [
                {"id": num[p.id], "name": p.name, "op": p.op.value, "engine": p.engine, "depth": p.depth}
                for p in g.primitives
            ],
            "edges": sorted([num[u], num[v]] for u, v in g.nx.edges),
        }

    @api.get("/apps/{app}/sample", summary="An app's sample query")
    async def sample(app: str) -> dict[str, Any]:
        import asyncio

        query, source = await asyncio.to_thread(state.app(app).sample)
        return {"query": query, "source": source}

    @api.get("/engines", summary="Live engine queues and utilisation")
    async def engines() -> dict[str, Any]:
        out = []
        for name, app in sorted(state.apps.items()):
            runtime = getattr(app, "runtime", None)
            health = runtime.health() if runtime is not None else {}
            for engine, spec in app.engines.items():
                h = health.get(engine, {})
                cap = h.get("capacity") or 0
                out.append(
                    {
                        "app": name,
                        "engine": engine,
                        "kind": spec.kind,
                        "started": bool(h.get("started")),
                        "healthy": bool(h.get("healthy")),
                        "queued": h.get("queued", 0),
                        "inflight": h.get("inflight", 0),
                        "capacity": cap,
                        "utilisation": (h.get("inflight", 0) / cap) if cap else 0.0,
                        "instances": len(h.get("instances", [])),
                        "policy": h.get("policy"),
                    }
                )
        return {"engines": out}


def _asset(name: str) -> str:
    return resources.files("teola.server").joinpath("static", name).read_text(encoding="utf-8")
