"""The server over a real socket (uvicorn with teola's protocol class, sim engines): requests that
uvicorn itself rejects still get the JSON error shape, and a well-formed request still works."""

from __future__ import annotations

import asyncio
import json
import socket

import uvicorn

from teola.server import ServerSettings, create_server
from teola.server.http_protocol import uvicorn_options
from tests.support.waiting import until
from tests.unit.server.test_server import make_echo_app


async def raw_exchange(port: int, data: bytes) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(data)
    await writer.drain()
    out = await asyncio.wait_for(reader.read(), 10)
    writer.close()
    return out


def split(response: bytes) -> tuple[int, dict[str, str], bytes]:
    head, _, body = response.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    headers = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    return int(lines[0].split()[1]), headers, body


async def test_uvicorns_own_400s_are_json():
    app, hanging = make_echo_app()
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(
        uvicorn.Config(
            create_server({"echo": app}, ServerSettings()), log_level="critical", **uvicorn_options()
        )
    )
    serving = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        await until(lambda: server.started)
        port = sock.getsockname()[1]
        for bad in (
            b"NOT HTTP AT ALL\r\n\r\n",
            b"GET / HTTP/1.1\r\nHost: x\r\nbad header line\r\n\r\n",
            b"GET /\x00 HTTP/1.1\r\nHost: x\r\n\r\n",
        ):
            status, headers, body = split(await raw_exchange(port, bad))
            assert status == 400 and headers["content-type"] == "application/json", (bad, body)
            data = json.loads(body)
            assert set(data) == {"error", "detail"} and data["error"] == "bad_http_request"
        huge = b"GET /" + b"a" * 200_000 + b" HTTP/1.1\r\nHost: x\r\n\r\n"
        status, headers, body = split(await raw_exchange(port, huge))
        assert status in (400, 404, 414) and headers["content-type"] == "application/json"
        assert set(json.loads(body)) == {"error", "detail"}
        status, _, body = split(
            await raw_exchange(port, b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        )
        assert status == 200 and json.loads(body) == {"status": "ok"}
    finally:
        hanging.release.set()
        server.should_exit = True
        await serving
        sock.close()
