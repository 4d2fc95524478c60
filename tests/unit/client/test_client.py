"""The blocking `teola.client.Client` against the real server (conftest: uvicorn on 127.0.0.1, sim
engines): every endpoint, the stream's typed events, each error family as its exception, and 429
retried after its Retry-After."""

from __future__ import annotations

import builtins
import hashlib
import threading
import time
from collections.abc import Callable, Iterator

import httpx
import pytest

from teola.client import (
    NO_RETRIES,
    AuthenticationError,
    Client,
    InvalidRequestError,
    NotFoundError,
    QueryResult,
    RateLimitError,
    Retries,
    TimeoutError,
    events,
)
from tests.unit.client.conftest import KEYS, Served


@pytest.fixture
def client(served: Served) -> Iterator[Client]:
    with Client(served.url, api_key=KEYS["team-a"]) as c:
        yield c


def test_health_ready_apps_graph_schema_and_metrics(client):
    assert client.health() is True
    ready = client.ready()
    assert ready.ready and ready.status == "ready" and ready.apps == {"echo": True} and not ready.down
    (app,) = client.apps()
    assert app.name == "echo" and app.ready and [(e.name, e.kind) for e in app.engines] == [("llm", "vllm")]
    assert app.components == ["answer"]
    assert "answer" in client.graph("echo") and client.graph("echo", format="dot").startswith("digraph")
    assert "answer" in client.config_schema("echo")["nodes"]["properties"]
    assert "teola_server_queries_total" in client.metrics()


def test_a_whole_query(client):
    result = client.query("echo", "Who designed the Eiffel Tower?", {"passes": {"prefill_split": False}})
    assert isinstance(result, QueryResult) and result.text and result.output == result.text
    assert result.query_id and result.latency > 0 and {row["primitive"] for row in result.trace}


def test_a_streamed_query_yields_typed_events(client):
    with client.stream("echo", {"question": "Who designed the Eiffel Tower?"}) as stream:
        got = list(stream)
        result = stream.result()
    assert isinstance(got[0], events.Started) and got[0].query_id == result.query_id
    assert [type(e) for e in got[-3:]] == [events.Answer, events.Trace, events.Done]
    progress = [e for e in got if isinstance(e, events.Progress)]
    tokens = [e for e in got if isinstance(e, events.Token)]
    assert {p.status for p in progress} == {"started", "finished"} and all(
        p.engine == "llm" for p in progress
    )
    assert tokens and "".join(t.text for t in tokens) == got[-3].text == stream.text == result.output
    assert got.index(progress[0]) < got.index(tokens[0])
    assert result.trace == got[-2].trace and result.latency == got[-2].latency


def test_a_stream_read_only_for_its_result(client):
    with client.stream("echo", "Who?") as stream:
        assert stream.result().text == stream.text


def test_upload_text_and_files_list_get_and_delete(client, tmp_path):
    notes = tmp_path / "notes.txt"
    notes.write_text("Gustave Eiffel's company built the tower.", encoding="utf-8")
    (text_id,) = client.upload("echo", "The Eiffel Tower is in Paris.")
    file_ids = client.upload_files("echo", [notes, ("more.txt", b"It opened in 1889.")])
    assert client.upload("echo", ["The Eiffel Tower is in Paris."]) == [text_id]  # content-addressed
    page = client.documents("echo")
    assert {d.id for d in page.documents} == {text_id, *file_ids} and page.next_after is None
    assert page.usage.documents == 3 and page.usage.max_documents > 3
    assert all(d.created.tzinfo is not None and d.bytes > 0 for d in page.documents)
    first = client.documents("echo", limit=1)
    assert first.next_after == first.documents[0].id
    assert [d.id for d in client.iter_documents("echo", page_size=1)] == sorted([text_id, *file_ids])
    assert client.document("echo", file_ids[0]) == notes.read_text(encoding="utf-8")
    assert client.query("echo", "Where?", document_ids=[text_id]).text
    for doc_id in (text_id, *file_ids):
        client.delete_document("echo", doc_id)
    with pytest.raises(NotFoundError) as missing:
        client.document("echo", text_id)
    assert (
        missing.value.status == 404
        and missing.value.code == "unknown_document"
        and text_id in str(missing.value)
    )
    with pytest.raises(NotFoundError):
        client.delete_document("echo", text_id)
    assert client.documents("echo").documents == []


def test_kept_namespaces_listed_and_deleted(client):
    client.query("echo", "Remember?", {"namespace": "notes"})
    kept = client.namespaces("echo")
    assert [n.name for n in kept.namespaces] == ["notes"] and kept.max_namespaces == 4
    client.delete_namespace("echo", "notes")
    assert client.namespaces("echo").namespaces == []


def test_a_wrong_key_is_an_authentication_error(served):
    with Client(served.url, api_key="not-a-key") as c:
        with pytest.raises(AuthenticationError) as wrong:
            c.apps()
        assert c.health() is True  # the probes need no key
    assert (
        wrong.value.status == 401 and wrong.value.code == "unauthorized" and "API key" in wrong.value.message
    )


def test_unknown_app_and_malformed_requests(client):
    with pytest.raises(NotFoundError) as unknown:
        client.query("nope", "Who?")
    assert unknown.value.status == 404 and "nope" in unknown.value.message
    with pytest.raises(InvalidRequestError) as invalid:
        client.query("echo", "Who?", {"bogus": 1})
    assert (
        invalid.value.status == 422
        and invalid.value.code == "invalid_request"
        and "bogus" in str(invalid.value)
    )
    with pytest.raises(InvalidRequestError) as empty:
        client.upload("echo", ["   "])
    assert empty.value.code == "empty_document"


def test_a_query_past_its_time_limit_is_a_timeout_error_whole_or_streamed(served):
    with Client(served.url, api_key=KEYS["team-c"]) as c:
        with pytest.raises(TimeoutError) as whole:
            c.query("echo", f"{served.hang} forever?", {"timeout": 0.3})
        assert whole.value.status == 504 and isinstance(whole.value, builtins.TimeoutError)
        with c.stream("echo", f"{served.hang} forever?", {"timeout": 0.3}) as stream:
            with pytest.raises(TimeoutError) as streamed:
                list(stream)
    assert streamed.value.status == 504 and isinstance(stream.text, str)


class Hung:
    """One query of team-b that hangs in the engine (the tenant's only slot) until `release`."""

    def __init__(self, served: Served) -> None:
        self.served = served
        before = served.llm.hung
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        until_sync(lambda: served.llm.hung > before)

    def _run(self) -> None:
        with Client(self.served.url, api_key=KEYS["team-b"]) as c:
            self.result = c.query("echo", f"{self.served.hang} until released?")

    def release(self) -> None:
        self.served.call(self.served.llm.release.set)
        self.thread.join(10)
        self.served.call(self.served.llm.release.clear)


def until_sync(cond, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.01)


def test_429_is_retried_after_retry_after_then_raised(served):
    hung = Hung(served)
    try:
        with Client(served.url, api_key=KEYS["team-b"], retries=NO_RETRIES) as c:
            with pytest.raises(RateLimitError) as at_once:
                c.query("echo", "Now?")
        assert at_once.value.code == "too_many_queries" and at_once.value.retry_after == 1.0
        with Client(served.url, api_key=KEYS["team-b"], retries=Retries(attempts=3)) as c:
            t0 = time.monotonic()
            with pytest.raises(RateLimitError) as late:
                c.query("echo", "Now?")
            waited = time.monotonic() - t0
        assert (
            late.value.status == 429 and waited >= 2 * at_once.value.retry_after
        )  # two waits of Retry-After: 1
    finally:
        hung.release()


class ReleasedOnRefusal(httpx.HTTPTransport):
    """The client's transport: the first 429 it receives calls `release` (the slot frees then, not
    on a timer that a slow machine could beat)."""

    def __init__(self, release: Callable[[], None]) -> None:
        super().__init__()
        self.release = release
        self.refused = 0

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = super().handle_request(request)
        if response.status_code == 429:
            self.refused += 1
            if self.refused == 1:
                self.release()
        return response


def test_429_retried_until_the_slot_frees(served):
    hung = Hung(served)
    transport = ReleasedOnRefusal(hung.release)
    with Client(served.url, api_key=KEYS["team-b"], retries=Retries(attempts=3), transport=transport) as c:
        t0 = time.monotonic()
        with c.stream("echo", "Now?") as stream:
            result = stream.result()
        waited = time.monotonic() - t0
    assert result.text and transport.refused == 1 and waited >= 1.0  # answered after Retry-After: 1
    assert hung.result.text


def test_closing_a_stream_early_cancels_its_query(served):
    before, hung = len(served.llm.aborted), served.llm.hung
    with Client(served.url, api_key=KEYS["team-c"]) as c:
        with c.stream("echo", f"{served.hang} until I leave?") as stream:
            assert isinstance(next(iter(stream)), events.Started)
            until_sync(lambda: served.llm.hung > hung)
        until_sync(lambda: len(served.llm.aborted) > before)  # its running LLM request was told to stop
        until_sync(lambda: _answers(c))  # and the tenant's only slot is free again


def _answers(c: Client) -> bool:
    try:
        return bool(c.query("echo", "Free?").text)
    except RateLimitError:
        return False


def test_files_are_read_by_their_extension_and_listed_with_what_their_upload_said(client):
    html = b"<html><body><h1>Eiffel</h1><p>A lattice tower.</p></body></html>"
    (page_id,) = client.upload_files("echo", ("tower.html", html), namespace="guides")
    (typed_id,) = client.upload_files("echo", [("notes", "# Heading\n\nPlain words.", "text/markdown")])
    (text_id,) = client.upload("echo", "Just text.", namespace="guides")
    assert "A lattice tower." in client.document("echo", page_id) and "<p>" not in client.document(
        "echo", page_id
    )
    assert "Plain words." in client.document("echo", typed_id) and "#" not in client.document(
        "echo", typed_id
    )
    listed = {d.id: d for d in client.documents("echo").documents}
    assert (listed[page_id].name, listed[page_id].namespace) == ("tower.html", "guides")
    assert listed[page_id].sha256 == hashlib.sha256(html).hexdigest()
    assert (listed[text_id].name, listed[text_id].namespace) == (None, "guides")
    for doc_id in (page_id, typed_id, text_id):
        client.delete_document("echo", doc_id)
