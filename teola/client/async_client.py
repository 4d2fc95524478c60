"""`AsyncClient`: the asyncio client of a teola server's native API (httpx.AsyncClient), with the
methods of `teola.client.Client`, awaited; and `AsyncQueryStream`, a streamed query's events."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Iterable, Mapping
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


class AsyncClient(Connection[httpx.AsyncClient]):
    """A connection to a teola server for asyncio code; arguments and methods as `Client`'s
    (each method's documentation is there), awaited. Close it (``await client.aclose()`` or
    ``async with``) when done."""

    def __init__(
        self,
        base_url: str | None = None,
        api_key: str | None = None,
        *,
        timeout: float | httpx.Timeout | None = DEFAULT_TIMEOUT,
        retries: Retries | None = None,
        headers: Mapping[str, str] | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        super().__init__(
            httpx.AsyncClient,
            base_url,
            api_key,
            timeout=timeout,
            retries=retries,
            headers=headers,
            transport=transport,
        )

    async def aclose(self) -> None:
        """Close the client's connections."""
        await self._http.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()

    async def query(
        self,
        app: str,
        query: str | Mapping[str, Any],
        config: Mapping[str, Any] | None = None,
        *,
        documents: Iterable[str] | None = None,
        document_ids: Iterable[str] | None = None,
    ) -> QueryResult:
        """`Client.query`."""
        return await self._call(
            calls.query(app, query, config, documents=documents, document_ids=document_ids)
        )

    def stream(
        self,
        app: str,
        query: str | Mapping[str, Any],
        config: Mapping[str, Any] | None = None,
        *,
        documents: Iterable[str] | None = None,
        document_ids: Iterable[str] | None = None,
    ) -> AsyncQueryStream:
        """`Client.stream`: ``async with client.stream(...) as events: async for event in events``
        (the request is sent when the stream is entered or first read)."""
        call = calls.query(app, query, config, documents=documents, document_ids=document_ids, stream=True)
        return AsyncQueryStream(self._send(call, stream=True))

    async def upload(
        self, app: str, texts: str | Iterable[str], *, namespace: str | None = None
    ) -> list[str]:
        """`Client.upload`."""
        return await self._call(calls.upload(app, texts, namespace))

    async def upload_files(
        self, app: str, files: FileLike | Iterable[FileLike], *, namespace: str | None = None
    ) -> list[str]:
        """`Client.upload_files`."""
        return await self._call(calls.upload_files(app, files, namespace))

    async def documents(self, app: str, limit: int = 100, after: str | None = None) -> DocumentPage:
        """`Client.documents`."""
        return await self._call(calls.documents(app, limit, after))

    async def iter_documents(self, app: str, page_size: int = 100) -> AsyncIterator[Document]:
        """`Client.iter_documents`."""
        after: str | None = None
        while True:
            page = await self.documents(app, page_size, after)
            for doc in page.documents:
                yield doc
            if page.next_after is None:
                return
            after = page.next_after

    async def document(self, app: str, document_id: str) -> str:
        """`Client.document`."""
        return await self._call(calls.document(app, document_id))

    async def delete_document(self, app: str, document_id: str) -> None:
        """`Client.delete_document`."""
        await self._call(calls.delete_document(app, document_id))

    async def namespaces(self, app: str) -> NamespaceList:
        """`Client.namespaces`."""
        return await self._call(calls.namespaces(app))

    async def delete_namespace(self, app: str, namespace: str) -> None:
        """`Client.delete_namespace`."""
        await self._call(calls.delete_namespace(app, namespace))

    async def apps(self) -> list[AppInfo]:
        """`Client.apps`."""
        return await self._call(calls.apps())

    async def config_schema(self, app: str) -> dict[str, Any]:
        """`Client.config_schema`."""
        return await self._call(calls.config_schema(app))

    async def graph(self, app: str, format: str = "text", graph: str = "egraph") -> str:
        """`Client.graph`."""
        return await self._call(calls.graph(app, format, graph))

    async def health(self) -> bool:
        """`Client.health`."""
        return await self._call(calls.health())

    async def ready(self) -> Readiness:
        """`Client.ready`."""
        return await self._call(calls.ready())

    async def metrics(self) -> str:
        """`Client.metrics`."""
        return await self._call(calls.metrics())

    async def _call(self, call: Call[T]) -> T:
        return call.read(await self._send(call))

    async def _send(self, call: Call[Any], stream: bool = False) -> httpx.Response:
        """`Client._send`, awaited."""
        for attempt in itertools.count(1):
            try:
                response = await self._http.send(call.request(self._http), stream=stream)
            except httpx.TransportError as exc:
                wait = wait_or_raise(self.retries, attempt, call.idempotent, failure=exc)
            else:
                if call.answered_by(response):
                    return response
                if stream:
                    await response.aread()
                    await response.aclose()
                wait = wait_or_raise(self.retries, attempt, call.idempotent, answer=response)
            await asyncio.sleep(wait)
        raise AssertionError("unreachable")


class AsyncQueryStream:
    """`teola.client.QueryStream` for asyncio: ``async for event in stream``, ``await stream.result()``;
    its request is sent when it is entered (``async with``) or first read."""

    def __init__(self, answer: Awaitable[httpx.Response]) -> None:
        self._answer = answer
        self._response: httpx.Response | None = None
        self._reader = EventReader()
        self._events = self._read()

    async def _open(self) -> httpx.Response:
        if self._response is None:
            self._response = await self._answer
        return self._response

    async def _read(self) -> AsyncGenerator[Event, None]:
        response = await self._open()
        try:
            async for line in response.aiter_lines():
                event = self._reader.feed(line)
                if event is not None:
                    yield event
            self._reader.finish()
        except httpx.TransportError as exc:
            raise connection_error(exc) from exc
        finally:
            await response.aclose()

    def __aiter__(self) -> AsyncIterator[Event]:
        return self._events

    @property
    def text(self) -> str:
        """The answer's tokens received so far."""
        return self._reader.text

    async def result(self) -> QueryResult:
        """Read the rest of the stream; the finished query's output and trace."""
        async for _ in self._events:
            pass
        assert self._reader.result is not None, "a stream that ended with done has an answer and a trace"
        return self._reader.result

    async def aclose(self) -> None:
        """Stop reading; before the end of the stream, this cancels the query on the server."""
        await self._events.aclose()
        if self._response is not None:
            await self._response.aclose()
        elif asyncio.iscoroutine(self._answer):
            self._answer.close()  # never sent

    async def __aenter__(self) -> AsyncQueryStream:
        await self._open()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()
