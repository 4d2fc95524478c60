"""A real teola server (create_server + uvicorn on 127.0.0.1, sim engines, documents in memory)
served from a thread of its own, so the blocking `Client` and the `AsyncClient` both talk to it over
a socket. Three tenants, each limited to one query at a time: ``team-a`` (most tests' caller),
``team-b`` (the 429 tests fill it with a query that hangs) and ``team-c`` (queries past their time
limit)."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import pytest
import uvicorn

from teola.server import ServerSettings, create_server
from teola.server.http_protocol import uvicorn_options
from tests.unit.server.test_server import HANG, HangingEngine, make_echo_app

KEYS = {"team-a": "key-a", "team-b": "key-b", "team-c": "key-c"}


@dataclass
class Served:
    """A server running in another thread: its `url`, its event `loop`, the echo app's `llm`."""

    url: str
    loop: asyncio.AbstractEventLoop
    llm: HangingEngine
    hang: str = HANG

    def call(self, fn: Callable[[], Any]) -> None:
        """Run `fn` on the server's loop (asyncio objects there are not thread-safe)."""
        self.loop.call_soon_threadsafe(fn)


@contextmanager
def served_in_thread(
    apps: dict[str, Any], settings: ServerSettings
) -> Iterator[tuple[str, asyncio.AbstractEventLoop]]:
    """Serve `apps` on a free loopback port from a thread with its own event loop; yields its URL
    and loop, and stops it (engines included) on exit."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(
        uvicorn.Config(create_server(apps, settings), log_level="warning", **uvicorn_options())
    )
    loop = asyncio.new_event_loop()
    thread = threading.Thread(
        target=loop.run_until_complete, args=(server.serve(sockets=[sock]),), daemon=True
    )
    thread.start()
    try:
        deadline = time.monotonic() + 60
        while not server.started:
            assert thread.is_alive(), "the teola server exited during start-up"
            assert time.monotonic() < deadline, "the teola server did not start within 60 s"
            time.sleep(0.02)
        yield f"http://127.0.0.1:{sock.getsockname()[1]}", loop
    finally:
        server.should_exit = True
        thread.join(30)
        loop.close()
        sock.close()


@pytest.fixture(scope="package")
def served() -> Iterator[Served]:
    echo, llm = make_echo_app()
    settings = ServerSettings(
        documents="memory",
        api_keys=";".join(f"{t}:{k}" for t, k in KEYS.items()),
        tenant_max_queries=1,
        query_timeout=30,
        max_tenant_namespaces=4,
    )
    with served_in_thread({"echo": echo}, settings) as (url, loop):
        yield Served(url=url, loop=loop, llm=llm)
        loop.call_soon_threadsafe(llm.release.set)  # nothing left hanging at shutdown
