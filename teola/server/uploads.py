"""Uploaded files turned into document texts: PDF, HTML, Markdown and DOCX through teola.loaders,
as a raw body of that content type or as multipart files; JSON and plain-text uploads are read as
before (teola.server.queries.read_documents).

A file that cannot be read answers 422 naming the file and the problem (encrypted PDF, corrupt
file, no text to extract, ...), a file over a limit 413, a type no loader reads 415 naming the
supported ones.

Each text comes with its `DocumentMeta`: the SHA-256 of what was sent for it (a file's bytes, or the
text's UTF-8), the file's name, and the upload's ``namespace`` query parameter (a label)."""

from __future__ import annotations

import asyncio
import hashlib

from fastapi import Request

from teola.loaders import SUPPORTED, LoaderError, LoaderLimitError, LoaderLimits, UnsupportedFileType, load
from teola.loaders.registry import BY_CONTENT_TYPE, parse_content_type
from teola.server.errors import ApiError
from teola.server.queries import read_documents
from teola.server.settings import ServerSettings
from teola.server.store.base import DocumentMeta

# Read by a loader when sent as the raw body; text/plain stays with read_documents.
FILE_TYPES = frozenset(BY_CONTENT_TYPE) - {"text/plain"}
FORM_FIELDS = ("document", "documents")  # multipart text fields taken as documents
SETTING_OF_LIMIT = {
    "max_bytes": "max_file_bytes",
    "max_pages": "max_file_pages",
    "max_chars": "max_document_chars",
}


def loader_limits(settings: ServerSettings) -> LoaderLimits:
    """The loaders' limits of a server: its file bytes and PDF pages, and its document characters."""
    return LoaderLimits(
        max_bytes=settings.max_file_bytes,
        max_pages=settings.max_file_pages,
        max_chars=settings.max_document_chars,
    )


async def read_uploads(
    request: Request, settings: ServerSettings, namespace: str | None = None
) -> list[tuple[str, DocumentMeta]]:
    """The texts of a document upload, each with its meta: multipart files and fields, a raw file
    body (PDF, HTML, Markdown, DOCX), JSON ``{"documents": [...]}`` or text/plain. ApiError 4xx
    naming the problem."""
    header = request.headers.get("content-type", "")
    mime, _ = parse_content_type(header)
    if mime == "multipart/form-data":
        texts = await _read_form(request, settings, namespace)
    elif mime in FILE_TYPES:
        raw = await request.body()
        if not raw:
            raise ApiError(400, "empty_body", f"the request body is empty; send the {mime} file as the body")
        texts = [(await _load(raw, header, None, settings), _meta(raw, None, namespace))]
    elif mime in ("", "application/json") or mime.startswith("text/"):
        return [(t, _meta(t.encode("utf-8"), None, namespace)) for t in await read_documents(request)]
    else:
        raise ApiError(
            415,
            "unsupported_media_type",
            f"unsupported content type {mime!r}; send application/json "
            f'{{"documents": [...]}}, multipart/form-data files, or a file as the body: {SUPPORTED}',
        )
    for i, (text, _) in enumerate(texts):
        if not text.strip():
            raise ApiError(422, "empty_document", f"document {i} is empty (or only whitespace)")
    return texts


def _meta(sent: bytes, name: str | None, namespace: str | None) -> DocumentMeta:
    return DocumentMeta(sha256=hashlib.sha256(sent).hexdigest(), name=name, namespace=namespace)


async def _read_form(
    request: Request, settings: ServerSettings, namespace: str | None
) -> list[tuple[str, DocumentMeta]]:
    form = await request.form()
    files = [(key, value) for key, value in form.multi_items() if not isinstance(value, str)]
    if len(files) > settings.max_documents:
        raise ApiError(
            413,
            "too_many_documents",
            f"{len(files)} files; at most {settings.max_documents} per "
            "upload (setting max_documents, env TEOLA_MAX_DOCUMENTS)",
        )
    texts = []
    for key, value in form.multi_items():
        if isinstance(value, str):
            if key in FORM_FIELDS:
                texts.append((value, _meta(value.encode("utf-8"), None, namespace)))
            continue
        if value.size is not None and value.size > settings.max_file_bytes:
            raise ApiError(
                413,
                "file_too_large",
                f"file {value.filename or key!r} has {value.size} bytes; at most "
                f"{settings.max_file_bytes} (setting max_file_bytes, env TEOLA_MAX_FILE_BYTES)",
            )
        data = await value.read()
        text = await _load(data, value.content_type, value.filename or key, settings)
        texts.append((text, _meta(data, value.filename or None, namespace)))
    return texts


async def _load(data: bytes, content_type: str | None, filename: str | None, settings: ServerSettings) -> str:
    try:  # parsing a PDF or DOCX is CPU work: off the event loop
        return await asyncio.to_thread(load, data, content_type, filename, loader_limits(settings))
    except UnsupportedFileType as exc:
        raise ApiError(415, "unsupported_media_type", str(exc)) from None
    except LoaderLimitError as exc:
        setting = SETTING_OF_LIMIT.get(exc.limit)
        where = f" (setting {setting}, env TEOLA_{setting.upper()})" if setting else ""
        raise ApiError(413, exc.code, f"{exc}{where}") from None
    except LoaderError as exc:
        raise ApiError(422, exc.code, str(exc)) from None
