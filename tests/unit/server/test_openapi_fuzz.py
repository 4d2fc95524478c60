"""A bounded schemathesis run over the server's own OpenAPI document (sim engines behind a real
uvicorn on loopback): every generated request, valid or not, gets an answer that is not a server
error and that matches the document (status codes, media types, response schemas)."""

from __future__ import annotations

import asyncio
import os
import socket
import threading
from collections.abc import Iterator

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from teola.server import ServerSettings, create_server
from teola.server.http_protocol import uvicorn_options
from tests.unit.server.test_server import make_echo_app, make_rag_app

EXAMPLES = int(os.environ.get("TEOLA_FUZZ_EXAMPLES", "30"))  # per operation; bench/ runs more
SETTINGS = ServerSettings(
    max_body_bytes=256 * 1024,
    max_documents=8,
    max_document_chars=20_000,
    query_timeout=10,
    documents="memory",
)
CHECKS = (not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance)


def apps() -> dict:
    return {"advanced_rag": make_rag_app()[0], "echo": make_echo_app()[0]}


schema = schemathesis.openapi.from_dict(create_server(apps(), SETTINGS).openapi())


@pytest.fixture(scope="module")
def base_url() -> Iterator[str]:
    """The server in a thread of its own (its own event loop), like a deployment."""
    import uvicorn

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(
        uvicorn.Config(create_server(apps(), SETTINGS), log_level="critical", **uvicorn_options())
    )
    thread = threading.Thread(target=lambda: asyncio.run(server.serve(sockets=[sock])), daemon=True)
    thread.start()
    while not server.started:
        threading.Event().wait(0.02)
    yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    server.should_exit = True
    thread.join(30)
    sock.close()


@schema.parametrize()
@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
def test_every_operation_answers_without_server_errors_and_as_documented(case, base_url):
    response = case.call(base_url=base_url, timeout=30)
    case.validate_response(response, checks=CHECKS)
