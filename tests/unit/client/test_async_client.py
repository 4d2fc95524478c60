"""`teola.client.AsyncClient` against the real server (conftest): a whole and a streamed query,
documents and namespaces, the error families, and 429 retried after its Retry-After with asyncio."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import httpx
import pytest

from teola.client import (
    AsyncClient,
    AuthenticationError,
    InvalidRequestError,
    NotFoundError,
    RateLimitError,
    Retries,
    events,
)
from tests.support.waiting import until
from tests.unit.client.conftest import KEYS, Served


@pytest.fixture
async def client(served: Served) -> AsyncIterator[AsyncClient]:
    async with AsyncClient(served.url, api_key=KEYS["team-a"]) as c:
        yield c


async def test_probes_apps_and_a_whole_query(client):
    assert await client.health() is True and (await client.ready()).ready
    assert [a.name for a in await client.apps()] == ["echo"]
    result = await client.query("echo", "Who designed the Eiffel Tower?")
    assert result.text and result.query_id and result.trace


async def test_a_streamed_query_yields_typed_events(client):
    async with client.stream("echo", "Who designed the Eiffel Tower?") as stream:
        got = [event async for event in stream]
        result = await stream.result()
    kinds = [type(e) for e in got]
    assert kinds[0] is events.Started and kinds[-3:] == [events.Answer, events.Trace, events.Done]
    assert {events.Progress, events.Token} == set(kinds[1:-3])
    assert "".join(e.text for e in got if isinstance(e, events.Token)) == result.output == stream.text


async def test_a_stream_read_without_entering_it(client):
    stream = client.stream("echo", "Who?")
    assert (await stream.result()).text
    await stream.aclose()


async def test_documents_and_namespaces(client):
    ids = await client.upload("echo", ["First text.", "Second text."])
    ids += await client.upload_files("echo", ("third.txt", "Third text."))
    assert [d.id async for d in client.iter_documents("echo", page_size=2)] == sorted(ids)
    assert await client.document("echo", ids[2]) == "Third text."
    for doc_id in ids:
        await client.delete_document("echo", doc_id)
    assert (await client.documents("echo")).usage.documents == 0
    await client.query("echo", "Keep?", {"namespace": "kept"})
    assert [n.name for n in (await client.namespaces("echo")).namespaces] == ["kept"]
    await client.delete_namespace("echo", "kept")
    assert (await client.namespaces("echo")).namespaces == []


async def test_error_families(served, client):
    async with AsyncClient(served.url, api_key="wrong") as stranger:
        with pytest.raises(AuthenticationError):
            await stranger.documents("echo")
    with pytest.raises(NotFoundError):
        await client.namespaces("nope")
    with pytest.raises(InvalidRequestError) as invalid:
        await client.query("echo", "Who?", {"nodes": {"answer": {"temperature": 9}}})
    assert invalid.value.status == 422 and "temperature" in invalid.value.message
    with pytest.raises(NotFoundError):
        async with client.stream("nope", "Who?"):
            pass


class ReleasedOnRefusal(httpx.AsyncHTTPTransport):
    """The client's transport: once `armed`, the next 429 it receives frees the hanging query."""

    def __init__(self, served: Served) -> None:
        super().__init__()
        self.served = served
        self.armed = False
        self.refused = 0

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await super().handle_async_request(request)
        if response.status_code == 429:
            self.refused += 1
            if self.armed:
                self.armed = False
                self.served.call(self.served.llm.release.set)
        return response


async def test_429_retried_after_retry_after_until_the_slot_frees(served):
    transport = ReleasedOnRefusal(served)
    async with AsyncClient(
        served.url, api_key=KEYS["team-b"], retries=Retries(attempts=3), transport=transport
    ) as c:
        before = served.llm.hung
        hung = asyncio.create_task(c.query("echo", f"{served.hang} until released?"))
        await until(lambda: served.llm.hung > before, interval=0.01)
        t0 = time.monotonic()
        with pytest.raises(RateLimitError) as refused:
            await c.query("echo", "Now?")
        assert time.monotonic() - t0 >= 2 * refused.value.retry_after  # tried 3 times, 1 s apart
        transport.armed, refusals = True, transport.refused
        t0 = time.monotonic()
        assert (await c.query("echo", "Now?")).text
        assert time.monotonic() - t0 >= refused.value.retry_after and transport.refused == refusals + 1
        assert (await hung).text
    served.call(served.llm.release.clear)
