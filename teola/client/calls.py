"""Every endpoint of the server's native API as a `Call`: the request to send (method, path, body)
and how to read its answer. Both clients send these; neither builds a request or reads an answer
itself, so the sync and the async client cannot drift apart."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Generic, TypeVar
from urllib.parse import quote

import httpx

import teola.client.results as results
from teola.client.results import AppInfo, DocumentPage, NamespaceList, QueryResult, Readiness

T = TypeVar("T")
Content = str | bytes | IO[bytes]
# a file to upload: a path, (file name, content) or (file name, content, content type)
FileLike = str | os.PathLike | tuple[str, Content] | tuple[str, Content, str]
# without a content type the server picks the reader by the name's extension
# (.pdf, .html, .md, .docx; else text)
UNTYPED = "application/octet-stream"


@dataclass(frozen=True, slots=True)
class Call(Generic[T]):
    """One request and the reader of its answer. `idempotent`: sending it twice does what sending it
    once does (it may be retried after a broken connection); `answers`: error statuses that are
    answers of this endpoint rather than errors (``/readyz``'s 503)."""

    method: str
    path: str
    read: Callable[[httpx.Response], T]
    params: dict[str, Any] | None = None
    json: Any = None
    files: list[tuple[str, tuple[str, bytes, str]]] | None = None
    idempotent: bool = True
    answers: frozenset[int] = field(default_factory=frozenset)

    def request(self, http: httpx.Client | httpx.AsyncClient) -> httpx.Request:
        """The request, built afresh for each try."""
        return http.build_request(
            self.method, self.path, params=self.params, json=self.json, files=self.files
        )

    def answered_by(self, response: httpx.Response) -> bool:
        """`response` is this call's answer (a success, or an error status among `answers`), not an
        error to retry or raise."""
        return response.is_success or response.status_code in self.answers


def query(
    app: str,
    question: str | Mapping[str, Any],
    config: Mapping[str, Any] | None = None,
    *,
    documents: Iterable[str] | None = None,
    document_ids: Iterable[str] | None = None,
    stream: bool = False,
) -> Call[QueryResult]:
    """``POST /v1/apps/{app}/query``: `question` is the question, or the whole query object."""
    if isinstance(question, str):
        body: dict[str, Any] = {"question": question}
    elif isinstance(question, Mapping):
        body = dict(question)
    else:
        raise TypeError(
            f"query: pass the question as a str or the query as a dict, not {type(question).__name__}"
        )
    if documents is not None:
        body["documents"] = [*body.get("documents", []), *_texts("documents", documents)]
    if document_ids is not None:
        body["document_ids"] = [*body.get("document_ids", []), *_texts("document_ids", document_ids)]
    if config is not None and not isinstance(config, Mapping):
        raise TypeError(
            f"query: config must be a dict (see docs/configuration.md), not {type(config).__name__}"
        )
    payload = {"query": body, "config": dict(config or {}), "stream": stream}
    return Call("POST", f"{_app(app)}/query", _json(results.query_result), json=payload, idempotent=False)


def upload(app: str, texts: str | Iterable[str], namespace: str | None = None) -> Call[list[str]]:
    """``POST /v1/apps/{app}/documents`` with JSON ``{"documents": [...]}``; `namespace`: a label
    stored with each new document."""
    docs = [texts] if isinstance(texts, str) else _texts("texts", texts)
    if not docs:
        raise ValueError("upload: give at least one text")
    return Call(
        "POST", f"{_app(app)}/documents", _json(_ids), params=_label(namespace), json={"documents": docs}
    )


def upload_files(
    app: str, files: FileLike | Iterable[FileLike], namespace: str | None = None
) -> Call[list[str]]:
    """``POST /v1/apps/{app}/documents`` as multipart files, read now so a retry can send them again.
    Several files come as a list; a tuple is one file, ``(name, content[, content type])``."""
    items = [files] if isinstance(files, (str, os.PathLike, tuple)) else list(files)
    if not items:
        raise ValueError("upload_files: give at least one file")
    parts = [("files", _file_part(item)) for item in items]
    return Call("POST", f"{_app(app)}/documents", _json(_ids), params=_label(namespace), files=parts)


def documents(app: str, limit: int = 100, after: str | None = None) -> Call[DocumentPage]:
    """``GET /v1/apps/{app}/documents``: a page of the caller's documents."""
    params: dict[str, Any] = {"limit": limit} if after is None else {"limit": limit, "after": after}
    return Call("GET", f"{_app(app)}/documents", _json(results.document_page), params=params)


def document(app: str, document_id: str) -> Call[str]:
    """``GET /v1/apps/{app}/documents/{id}``: the text as uploaded."""
    return Call("GET", f"{_app(app)}/documents/{_part(document_id)}", _text)


def delete_document(app: str, document_id: str) -> Call[None]:
    """``DELETE /v1/apps/{app}/documents/{id}``."""
    return Call("DELETE", f"{_app(app)}/documents/{_part(document_id)}", _nothing)


def namespaces(app: str) -> Call[NamespaceList]:
    """``GET /v1/apps/{app}/namespaces``."""
    return Call("GET", f"{_app(app)}/namespaces", _json(results.namespace_list))


def delete_namespace(app: str, namespace: str) -> Call[None]:
    """``DELETE /v1/apps/{app}/namespaces/{namespace}``."""
    return Call("DELETE", f"{_app(app)}/namespaces/{_part(namespace)}", _nothing)


def apps() -> Call[list[AppInfo]]:
    """``GET /v1/apps``."""
    return Call("GET", "/v1/apps", _json(results.app_list))


def config_schema(app: str) -> Call[dict[str, Any]]:
    """``GET /v1/apps/{app}/config_schema``."""
    return Call("GET", f"{_app(app)}/config_schema", _json(dict))


def graph(app: str, format: str = "text", graph: str = "egraph") -> Call[str]:
    """``GET /v1/apps/{app}/graph``."""
    return Call("GET", f"{_app(app)}/graph", _text, params={"format": format, "graph": graph})


def health() -> Call[bool]:
    """``GET /healthz``."""
    return Call("GET", "/healthz", lambda r: r.json().get("status") == "ok")


def ready() -> Call[Readiness]:
    """``GET /readyz``: its 503 (not ready) is an answer, not an error."""
    return Call(
        "GET", "/readyz", lambda r: results.readiness(r.json(), r.status_code), answers=frozenset({503})
    )


def metrics() -> Call[str]:
    """``GET /metrics``: Prometheus text."""
    return Call("GET", "/metrics", _text)


def _json(make: Callable[[Any], T]) -> Callable[[httpx.Response], T]:
    return lambda response: make(response.json())


def _ids(body: dict[str, Any]) -> list[str]:
    return list(body["document_ids"])


def _text(response: httpx.Response) -> str:
    return response.text


def _nothing(response: httpx.Response) -> None:
    return None


def _app(app: str) -> str:
    return f"/v1/apps/{_part(app)}"


def _part(value: str) -> str:
    if not isinstance(value, str) or not value:
        raise TypeError(f"an app name, document id or namespace must be a non-empty str, got {value!r}")
    return quote(value, safe="")


def _texts(name: str, values: Iterable[str]) -> list[str]:
    if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
        raise TypeError(f"{name} must be a list of str, got {type(values).__name__}")
    out = list(values)
    bad = [type(v).__name__ for v in out if not isinstance(v, str)]
    if bad:
        raise TypeError(f"{name} must hold only str, found {', '.join(sorted(set(bad)))}")
    return out


def _label(namespace: str | None) -> dict[str, str] | None:
    return {"namespace": namespace} if namespace else None


def _file_part(item: FileLike) -> tuple[str, bytes, str]:
    if not isinstance(item, tuple):
        return Path(item).name, Path(item).read_bytes(), UNTYPED
    if len(item) not in (2, 3):
        raise TypeError(
            "upload_files: a tuple is one file, (name, content[, content type]); several files: a list; "
            f"got {item!r}"
        )
    name, content = item[0], item[1]
    if isinstance(content, str):
        data = content.encode("utf-8")
    elif isinstance(content, bytes):
        data = content
    elif callable(getattr(content, "read", None)):
        data = content.read()
    else:
        raise TypeError(
            f"upload_files: the content of {name!r} must be str, bytes or an open binary file, "
            f"not {type(content).__name__}"
        )
    return name, data, item[2] if len(item) == 3 else UNTYPED
