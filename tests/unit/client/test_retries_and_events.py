"""The client's parts without a server: Retry-After read as seconds or an HTTP date, the retry
decisions (what is retried, how long it waits, when it gives up), a 503 with a date retried through
a mock transport, connection failures, the event reader, and error bodies of other shapes."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import httpx
import pytest

from teola.client import (
    APIConnectionError,
    AsyncClient,
    Client,
    InvalidRequestError,
    RateLimitError,
    Retries,
    ServerError,
    UnavailableError,
    errors,
    events,
)
from teola.client.errors import error_from_response, retry_after
from teola.client.events import EventReader


def answer(status: int, code: str = "x", headers: dict[str, str] | None = None) -> httpx.Response:
    return httpx.Response(
        status,
        json={"error": code, "detail": f"{code} happened"},
        headers=headers,
        request=httpx.Request("GET", "http://teola.test/v1/apps"),
    )


def test_retry_after_in_seconds_or_as_an_http_date():
    assert retry_after(httpx.Headers({"Retry-After": "3"})) == 3.0
    assert retry_after(httpx.Headers({"Retry-After": "0.5"})) == 0.5
    later = datetime.now(UTC) + timedelta(seconds=30)
    assert 28 <= retry_after(httpx.Headers({"Retry-After": format_datetime(later, usegmt=True)})) <= 30
    assert retry_after(httpx.Headers({"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"})) == 0.0  # past
    for unreadable in ("soon", "inf", ""):
        assert retry_after(httpx.Headers({"Retry-After": unreadable})) is None
    assert retry_after(httpx.Headers()) is None


def test_what_is_retried_and_how_long_it_waits():
    r = Retries(attempts=3, max_wait=10, backoff=0.5)
    assert r.after_answer(1, answer(429, "too_many_queries", {"Retry-After": "2"}), "too_many_queries") == 2.0
    assert r.after_answer(2, answer(503, "engine_down"), "engine_down") == 1.0  # no header: backoff doubled
    assert r.after_answer(3, answer(429, headers={"Retry-After": "1"}), "x") is None  # out of tries
    assert r.after_answer(1, answer(429, headers={"Retry-After": "60"}), "x") is None  # longer than max_wait
    assert r.after_answer(1, answer(429, headers={"Retry-After": "1"}), "quota_exceeded") is None
    assert (
        r.after_answer(1, answer(502), "engine_failed") is None
        and r.after_answer(1, answer(422), "x") is None
    )
    request = httpx.Request("POST", "http://teola.test/v1/apps/echo/query")
    assert r.after_failure(1, httpx.ConnectError("refused", request=request), idempotent=False) == 0.5
    assert r.after_failure(1, httpx.ReadError("reset", request=request), idempotent=False) is None
    assert r.after_failure(1, httpx.ReadError("reset", request=request), idempotent=True) == 0.5
    with pytest.raises(ValueError, match="attempts"):
        Retries(attempts=0)


def test_a_503_with_an_http_date_is_retried_after_it():
    tries: list[float] = []
    due = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=2)
    when = format_datetime(due, usegmt=True)

    def handler(request: httpx.Request) -> httpx.Response:
        tries.append(time.time())
        if len(tries) == 1:
            return httpx.Response(
                503, json={"error": "engine_down", "detail": "restarting"}, headers={"Retry-After": when}
            )
        return httpx.Response(200, json={"apps": []})

    with Client("http://teola.test", transport=httpx.MockTransport(handler)) as c:
        assert c.apps() == []
    # the retry waits for the date itself (1-2 s ahead at whole-second precision when written, a few ms
    # less when the first answer arrives: the gap alone can read 0.9994 s); 20 ms for the sleep's wake-up
    assert len(tries) == 2 and tries[1] >= due.timestamp() - 0.02 and tries[1] - tries[0] > 0.5


async def test_the_async_client_gives_up_with_the_last_answer():
    tries = 0

    def handler(request: httpx.Request) -> httpx.Response:
        nonlocal tries
        tries += 1
        return httpx.Response(503, json={"error": "store_unavailable", "detail": "no PostgreSQL"})

    async with AsyncClient(
        "http://teola.test", transport=httpx.MockTransport(handler), retries=Retries(attempts=3, backoff=0.01)
    ) as c:
        with pytest.raises(UnavailableError) as down:
            await c.upload("echo", "text")
    assert tries == 3 and down.value.code == "store_unavailable" and isinstance(down.value, ServerError)


def test_a_query_is_not_resent_after_a_broken_connection_but_a_read_is():
    sent: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(request.method)
        raise httpx.ReadError("connection reset", request=request)

    with Client(
        "http://teola.test", transport=httpx.MockTransport(handler), retries=Retries(backoff=0.01)
    ) as c:
        with pytest.raises(APIConnectionError):
            c.query("echo", "Who?")
        assert sent == ["POST"]
        with pytest.raises(APIConnectionError, match="ReadError"):
            c.documents("echo")
    assert sent == ["POST", "GET", "GET", "GET"]


def test_a_server_that_is_not_there():
    with Client("http://127.0.0.1:9", retries=Retries(attempts=2, backoff=0.01)) as c:
        with pytest.raises(APIConnectionError):
            c.health()


def test_the_event_reader():
    reader = EventReader()
    lines = [
        ": keep-alive",
        "event: started",
        'data: {"query_id": "q1"}',
        "",
        "event: token",
        'data: {"primitive": "answer", "text": "Hi", "new_field": 1}',
        "",
        "event: novelty",
        "data: [1,",
        "data: 2]",
        "",
        "event: answer",
        'data: {"text": "Hi", "output": "Hi"}',
        "",
        "event: trace",
        'data: {"trace": [], "query_id": "q1", "latency": 0.5}',
        "",
        "event: done",
        'data: {"query_id": "q1"}',
        "",
    ]
    got = [e for e in map(reader.feed, lines) if e is not None]
    assert got[0] == events.Started(query_id="q1") and got[1] == events.Token(primitive="answer", text="Hi")
    assert got[2] == events.UnknownEvent(name="novelty", data=[1, 2])
    reader.finish()
    assert reader.text == "Hi" and reader.result.output == "Hi" and reader.result.latency == 0.5


def test_an_error_event_raises_and_a_cut_stream_is_a_connection_error():
    reader = EventReader()
    reader.feed("event: error")
    with pytest.raises(RateLimitError, match="token_rate_exceeded"):
        reader.feed('data: {"status": 429, "error": "token_rate_exceeded", "detail": "over"}')
        reader.feed("")
    cut = EventReader()
    for line in ("event: started", 'data: {"query_id": "q"}', ""):
        cut.feed(line)
    with pytest.raises(APIConnectionError, match="before its done event"):
        cut.finish()


def test_error_bodies_of_other_shapes():
    request = httpx.Request("GET", "http://teola.test/v1/models")
    door = httpx.Response(
        400,
        json={"error": {"message": "bad field", "type": "invalid_request_error", "code": "invalid_value"}},
        request=request,
    )
    error = error_from_response(door)
    assert isinstance(error, InvalidRequestError) and (error.code, error.message) == (
        "invalid_value",
        "bad field",
    )
    proxy = error_from_response(httpx.Response(502, text="<html>Bad gateway</html>", request=request))
    assert isinstance(proxy, ServerError) and proxy.code == "http_502" and "Bad gateway" in proxy.message


def test_url_and_key_from_the_environment(monkeypatch):
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json={"status": "ok"})

    monkeypatch.setenv("TEOLA_URL", "http://teola.example:9000/")
    monkeypatch.setenv("TEOLA_API_KEY", "from-env")
    with Client(transport=httpx.MockTransport(handler)) as c:
        assert c.base_url == "http://teola.example:9000" and c.health() is True
    assert str(seen[0].url) == "http://teola.example:9000/healthz"
    assert seen[0].headers["authorization"] == "Bearer from-env"
    with pytest.raises(ValueError, match="http://"):
        Client("teola.example:9000")


def test_the_clients_own_timeout_is_a_timeout_error_and_a_query_is_not_resent():
    sent = 0

    def handler(request: httpx.Request) -> httpx.Response:
        nonlocal sent
        sent += 1
        raise httpx.ReadTimeout("no answer", request=request)

    with Client("http://teola.test", transport=httpx.MockTransport(handler)) as c:
        with pytest.raises(errors.TimeoutError) as slow:
            c.query("echo", "Who?")
    assert sent == 1 and slow.value.status is None and slow.value.code == "client_timeout"
