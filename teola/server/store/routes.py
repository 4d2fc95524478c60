"""The endpoints of what a tenant keeps on the server: uploaded documents (teola.server.store.documents)
and kept vector-store namespaces (teola.server.store.namespaces). Everything is the caller's tenant's:
another tenant's id or namespace is unknown (404), never forbidden (403)."""

from __future__ import annotations

from datetime import UTC, datetime

from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse, PlainTextResponse, Response

from teola.loaders.registry import DOCX_TYPE
from teola.server.errors import ApiError
from teola.server.queries import check_documents
from teola.server.schemas import DocumentList, DocumentsResponse, ErrorResponse, NamespaceList
from teola.server.state import ServerState
from teola.server.store.base import DocumentInfo
from teola.server.store.documents import MAX_PAGE
from teola.server.tenants import namespace_for
from teola.server.uploads import read_uploads

_QUOTA = {429: {"model": ErrorResponse, "description": "over a per-tenant cap (Retry-After)"}}
_TEXT = {
    200: {
        "description": "the document's text as stored (of a file: the text extracted from it)",
        "content": {"text/plain": {"schema": {"type": "string"}}},
    }
}
_UPLOAD_BODY = {
    "requestBody": {
        "content": {
            "multipart/form-data": {
                "schema": {
                    "type": "object",
                    "properties": {
                        "files": {"type": "array", "items": {"type": "string", "format": "binary"}}
                    },
                }
            },
            "application/json": {
                "schema": {
                    "type": "object",
                    "properties": {"documents": {"type": "array", "items": {"type": "string"}}},
                    "required": ["documents"],
                }
            },
            "text/plain": {"schema": {"type": "string"}},
            **{
                ctype: {"schema": {"type": "string", "format": "binary"}}
                for ctype in ("application/pdf", "text/html", "text/markdown", DOCX_TYPE)
            },
        }
    }
}

_LABEL = Query(
    None,
    max_length=200,
    description="a label stored with each new document (listed; not a kept vector-store namespace)",
)


def add_storage_routes(api: APIRouter, state: ServerState) -> None:
    """Document upload, listing, reading and deletion; namespace listing and deletion."""
    _add_document_routes(api, state)
    _add_namespace_routes(api, state)


def _add_document_routes(api: APIRouter, state: ServerState) -> None:
    """Upload and list a tenant's documents of an app; read and delete one."""

    @api.post(
        "/v1/apps/{app}/documents",
        summary="Upload documents",
        status_code=201,
        response_model=DocumentsResponse,
        openapi_extra=_UPLOAD_BODY,
        responses=_QUOTA,
    )
    async def upload(app: str, request: Request, namespace: str | None = _LABEL) -> JSONResponse:
        state.app(app)
        uploaded = await read_uploads(request, state.settings, namespace or None)
        if not uploaded:
            raise ApiError(422, "no_documents", "no documents in the request body")
        texts = [text for text, _ in uploaded]
        check_documents(state.settings, texts)
        ids = await state.documents.add(request.state.tenant, app, texts, [meta for _, meta in uploaded])
        return JSONResponse({"document_ids": ids}, status_code=201)

    @api.get(
        "/v1/apps/{app}/documents", summary="The caller's documents of an app", response_model=DocumentList
    )
    async def list_documents(
        app: str,
        request: Request,
        limit: int = Query(100, ge=1, le=MAX_PAGE),
        after: str | None = Query(None, description="the last id of the previous page"),
    ) -> DocumentList:
        state.app(app)
        tenant = request.state.tenant
        docs = await state.documents.page(tenant, app, limit, after)
        usage = await state.documents.usage(tenant)
        return DocumentList(
            documents=[_listed(d) for d in docs],
            next_after=docs[-1].id if len(docs) == limit else None,
            usage={
                "documents": usage.documents,
                "bytes": usage.bytes,
                "max_documents": state.documents.max_documents,
                "max_bytes": state.documents.max_bytes,
            },
        )

    @api.get("/v1/apps/{app}/documents/{doc_id}", summary="The text of an uploaded document", responses=_TEXT)
    async def get_document(app: str, doc_id: str, request: Request) -> PlainTextResponse:
        state.app(app)
        text = await state.documents.get(request.state.tenant, app, doc_id)
        if text is None:
            raise ApiError(404, "unknown_document", f"unknown document id {doc_id!r} for app {app!r}")
        return PlainTextResponse(text)

    @api.delete("/v1/apps/{app}/documents/{doc_id}", summary="Forget an uploaded document", status_code=204)
    async def delete_document(app: str, doc_id: str, request: Request) -> Response:
        state.app(app)
        if not await state.documents.delete(request.state.tenant, app, doc_id):
            raise ApiError(404, "unknown_document", f"unknown document id {doc_id!r} for app {app!r}")
        return Response(status_code=204)


def _add_namespace_routes(api: APIRouter, state: ServerState) -> None:
    """List a tenant's kept namespaces of an app; delete one (its rows in the vector store too)."""

    @api.get(
        "/v1/apps/{app}/namespaces",
        summary="The caller's kept namespaces of an app",
        response_model=NamespaceList,
    )
    async def list_namespaces(app: str, request: Request) -> NamespaceList:
        state.app(app)
        kept = await state.namespaces.names(request.state.tenant, app)
        return NamespaceList(
            namespaces=[{"namespace": n.namespace, "created": _iso(n.created)} for n in kept],
            max_namespaces=state.namespaces.max_namespaces,
        )

    @api.delete(
        "/v1/apps/{app}/namespaces/{namespace}",
        summary="Delete a namespace of the caller's tenant",
        status_code=204,
    )
    async def delete_namespace(app: str, namespace: str, request: Request) -> Response:
        target = state.app(app)
        if target.runtime is None:
            raise ApiError(503, "not_ready", f"app {app!r}: engines not started yet; retry shortly")
        await target.runtime.drop_namespace(namespace_for(request.state.tenant, namespace))
        await state.namespaces.forget(request.state.tenant, app, namespace)
        return Response(status_code=204)


def _listed(doc: DocumentInfo) -> dict[str, object]:
    return {
        "id": doc.id,
        "bytes": doc.bytes,
        "created": _iso(doc.created),
        "sha256": doc.meta.sha256,
        "name": doc.meta.name,
        "namespace": doc.meta.namespace,
    }


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat()
