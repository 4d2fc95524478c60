"""`Client`: the blocking client of a teola server's native API (httpx.Client), and `QueryStream`,
the events of one streamed query. `teola.client.AsyncClient` has the same methods, awaited."""

from __future__ import annotations

import itertools
import time
from collections.abc import Generator, Iterable, Iterator, Mapping
from typing import Any

import httpx

import teola.client.calls as calls
from teola.client.calls import Call, FileLike, T
from teola.client.connection import Connection
from teola.client.errors import connection_error
from teola.client.events import Event, EventReader
from teola.client.options import DEFAULT_TIMEOUT
from teola.client.results import AppInfo, Document, DocumentPage, NamespaceList, QueryResult, Readiness
from teola.client.retries import Retries, wait_or_raise


class Client(Connection[httpx.Client]):
    """A connection to a teola server (``teola serve``).

    `base_url`: the server (default ``$TEOLA_URL``, else http://127.0.0.1:8000); `api_key`: sent as
    ``Authorization: Bearer`` (default ``$TEOLA_API_KEY``; none for a server without keys);
    `timeout`: seconds, or an ``httpx.Timeout``; `retries`: when to try again (`Retries`: 429 and 503
    after their ``Retry-After``, connection failures); `headers`: sent with every request (e.g. a
    ``traceparent``); `transport`: an httpx transport (tests, proxies). Error answers raise the
    `teola.client.errors` exception of their status. Close it (or use ``with``) when done.
    """

    def __init__(
        self,
        base_url: str | None = None,
        api_key: str | None = None,
        *,
        timeout: float | httpx.Timeout | None = DEFAULT_TIMEOUT,
        retries: Retries | None = None,
        headers: Mapping[str, str] | None = None,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        super().__init__(
            httpx.Client,
            base_url,
            api_key,
            timeout=timeout,
            retries=retries,
            headers=headers,
            transport=transport,
        )

    def close(self) -> None:
        """Close the client's connections."""
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # ---- queries ----------------------------------------------------------------------------------
    def query(
        self,
        app: str,
        query: str | Mapping[str, Any],
        config: Mapping[str, Any] | None = None,
        *,
        documents: Iterable[str] | None = None,
        document_ids: Iterable[str] | None = None,
    ) -> QueryResult:
        """Run one query of `app` and return its output and trace. `query`: the question, or the
        whole query object (``{"question": ..., "documents": [...]}``); `config`: the per-query
        configuration (docs/configuration.md); `documents`: texts, `document_ids`: uploaded ids,
        added to the query's."""
        return self._call(calls.query(app, query, config, documents=documents, document_ids=document_ids))

    def stream(
        self,
        app: str,
        query: str | Mapping[str, Any],
        config: Mapping[str, Any] | None = None,
        *,
        documents: Iterable[str] | None = None,
        document_ids: Iterable[str] | None = None,
    ) -> QueryStream:
        """Run one query of `app` as a stream of typed events (`teola.client.events`): iterate the
        returned `QueryStream`; its `result()` is the `QueryResult`. Arguments as `query`. Close it
        (or use ``with``): closing before the end cancels the query on the server."""
        call = calls.query(app, query, config, documents=documents, document_ids=document_ids, stream=True)
        return QueryStream(self._send(call, stream=True))

    # ---- documents and namespaces -----------------------------------------------------------------
    def upload(self, app: str, texts: str | Iterable[str], *, namespace: str | None = None) -> list[str]:
        """Store texts for `app` (a str or a list); their ids, in order, to pass as ``document_ids``.
        The same text again answers the same id and stores nothing more. `namespace`: a label kept
        with each new document and listed by `documents` (not a kept vector-store namespace)."""
        return self._call(calls.upload(app, texts, namespace))

    def upload_files(
        self, app: str, files: FileLike | Iterable[FileLike], *, namespace: str | None = None
    ) -> list[str]:
        """Store files for `app`: a path, a ``(name, content)`` pair (content str, bytes or an open
        binary file) or a ``(name, content, content_type)`` triple, or a list of them; their ids, in
        order. The server reads PDF, HTML, Markdown, DOCX and text: by the content type when given,
        else by the name's extension. `namespace` as in `upload`."""
        return self._call(calls.upload_files(app, files, namespace))

    def documents(self, app: str, limit: int = 100, after: str | None = None) -> DocumentPage:
        """A page of the caller's documents of `app` in id order (at most `limit`, after the id
        `after`), with the tenant's usage and caps."""
        return self._call(calls.documents(app, limit, after))

    def iter_documents(self, app: str, page_size: int = 100) -> Iterator[Document]:
        """Every document of the caller's in `app`, page by page."""
        after: str | None = None
        while True:
            page = self.documents(app, page_size, after)
            yield from page.documents
            if page.next_after is None:
                return
            after = page.next_after

    def document(self, app: str, document_id: str) -> str:
        """The text of an uploaded document (a file's: as the server read it); NotFoundError when unknown."""
        return self._call(calls.document(app, document_id))

    def delete_document(self, app: str, document_id: str) -> None:
        """Forget an uploaded document (NotFoundError when the caller has no such id)."""
        self._call(calls.delete_document(app, document_id))

    def namespaces(self, app: str) -> NamespaceList:
        """The namespaces the caller keeps in `app` (``config.namespace``) and the tenant's cap."""
        return self._call(calls.namespaces(app))

    def delete_namespace(self, app: str, namespace: str) -> None:
        """Drop a kept namespace: its vectors and its record."""
        self._call(calls.delete_namespace(app, namespace))

    # ---- the server -------------------------------------------------------------------------------
    def apps(self) -> list[AppInfo]:
        """The apps served, with their engines and components."""
        return self._call(calls.apps())

    def config_schema(self, app: str) -> dict[str, Any]:
        """The JSON schema of `app`'s ``config.nodes`` and ``config.passes``."""
        return self._call(calls.config_schema(app))

    def graph(self, app: str, format: str = "text", graph: str = "egraph") -> str:
        """`app`'s graph for a sample query: `format` text, dot or mermaid; `graph` egraph or pgraph."""
        return self._call(calls.graph(app, format, graph))

    def health(self) -> bool:
        """True when the server answers ``/healthz`` (APIConnectionError when it cannot be reached)."""
        return self._call(calls.health())

    def ready(self) -> Readiness:
        """``/readyz``: whether every app's engines are started and healthy, and which are down."""
        return self._call(calls.ready())

    def metrics(self) -> str:
        """The Prometheus metrics, as text."""
        return self._call(calls.metrics())

    # ---- sending ----------------------------------------------------------------------------------
    def _call(self, call: Call[T]) -> T:
        return call.read(self._send(call))

    def _send(self, call: Call[Any], stream: bool = False) -> httpx.Response:
        """The answer of `call`, tried again as `self.retries` says; raises its error otherwise."""
        for attempt in itertools.count(1):
            try:
                response = self._http.send(call.request(self._http), stream=stream)
            except httpx.TransportError as exc:
                wait = wait_or_raise(self.retries, attempt, call.idempotent, failure=exc)
            else:
                if call.answered_by(response):
                    return response
                if stream:
                    response.read()
                    response.close()
                wait = wait_or_raise(self.retries, attempt, call.idempotent, answer=response)
            time.sleep(wait)
        raise AssertionError("unreachable")


class QueryStream:
    """The events of one streamed query (`teola.client.events`), read as they come: iterate it once.
    `text`: the answer's tokens so far; `result()`: reads what is left and returns the `QueryResult`.
    An ``error`` event raises its exception; closing the stream early cancels the query."""

    def __init__(self, response: httpx.Response) -> None:
        self._response = response
        self._reader = EventReader()
        self._events = self._read()

    def _read(self) -> Generator[Event, None, None]:
        try:
            for line in self._response.iter_lines():
                event = self._reader.feed(line)
                if event is not None:
                    yield event
            self._reader.finish()
        except httpx.TransportError as exc:
            raise connection_error(exc) from exc
        finally:
            self._response.close()

    def __iter__(self) -> Iterator[Event]:
        return self._events

    @property
    def text(self) -> str:
        """The answer's tokens received so far."""
        return self._reader.text

    def result(self) -> QueryResult:
        """Read the rest of the stream; the finished query's output and trace."""
        for _ in self._events:
            pass
        assert self._reader.result is not None, "a stream that ended with done has an answer and a trace"
        return self._reader.result

    def close(self) -> None:
        """Stop reading; before the end of the stream, this cancels the query on the server."""
        self._events.close()
        self._response.close()

    def __enter__(self) -> QueryStream:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
