"""Authentication fails closed and the server is not reachable from a web page by surprise: key
settings that name no key are refused at start naming the file or setting; binding beyond
loopback without keys is warned about loudly; a Host outside the allow-list is refused
(teola.server.hosts: no DNS rebinding); the OpenAI door reads only application/json bodies (no
cross-site text/plain POSTs)."""

from __future__ import annotations

import json
import logging

import pytest

from teola.server import ServerSettings, create_server
from tests.unit.server.test_openai_door import serve as serve_door
from tests.unit.server.test_server import make_echo_app, serve

CHAT = {"model": "agent", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}


@pytest.mark.parametrize("content", ["{}", '{"alpha": []}'])
def test_a_keys_file_that_names_no_key_is_refused_at_start_naming_the_file(tmp_path, content):
    path = tmp_path / "keys.json"
    path.write_text(content)
    app, _ = make_echo_app()
    with pytest.raises(ValueError) as refused:
        create_server(
            {"echo": app}, ServerSettings(api_keys_file=str(path), documents="memory", start_engines=False)
        )
    assert str(path) in str(refused.value)


@pytest.mark.parametrize("value", [";", " ; ;"])
def test_api_keys_that_name_no_key_are_refused_at_start(value):
    app, _ = make_echo_app()
    with pytest.raises(ValueError) as refused:
        create_server(
            {"echo": app},
            ServerSettings.from_env({"TEOLA_API_KEYS": value}, documents="memory", start_engines=False),
        )
    assert "TEOLA_API_KEYS" in str(refused.value) and "no key" in str(refused.value)


def test_binding_beyond_loopback_without_keys_is_warned_about_loudly(caplog):
    app, _ = make_echo_app()
    lines: list[str] = []
    settings = ServerSettings(documents="memory", start_engines=False)
    with caplog.at_level(logging.WARNING, logger="teola.server"):
        create_server({"echo": app}, settings, progress=lines.append, host="0.0.0.0")
    warned = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert any("0.0.0.0" in m and "WITHOUT ANY API KEY" in m for m in warned), warned
    assert any("WITHOUT ANY API KEY" in line for line in lines), "the command line shows it too"
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="teola.server"):
        create_server({"echo": app}, settings, host="127.0.0.1")
        create_server(
            {"echo": app},
            ServerSettings(api_key="k", documents="memory", start_engines=False),
            host="0.0.0.0",
        )
    assert not [r for r in caplog.records if "API KEY" in r.getMessage()]


async def test_a_host_outside_the_allow_list_is_refused_before_anything_runs():
    app, _ = make_echo_app()
    settings = ServerSettings(documents="memory", allowed_hosts="teola.example.com, *.corp.example")
    async with serve({"echo": app}, settings) as c:
        for host in ("evil.example.net", "evil.example.net:8000", "127.0.0.1.evil.example.net"):
            for path in ("/v1/ui/queries", "/v1/apps/echo/documents"):
                r = await c.get(path, headers={"Host": host})
                assert r.status_code == 400 and r.json()["error"] == "host_not_allowed", (host, path, r.text)
                assert "allowed_hosts" in r.json()["detail"]
        door = await c.post("/v1/chat/completions", json=CHAT, headers={"Host": "evil.example.net"})
        assert door.status_code == 400 and door.json()["error"]["code"] == "host_not_allowed"
        for host in (
            "localhost:8000",
            "127.0.0.1:8000",
            "[::1]:8000",
            "app.localhost",
            "teola.example.com",
            "a.corp.example:443",
        ):
            assert (await c.get("/v1/ui/queries", headers={"Host": host})).status_code == 200, host


async def test_the_host_the_server_binds_is_served():
    app, _ = make_echo_app()
    server = create_server(
        {"echo": app},
        ServerSettings(documents="memory", api_key="k", start_engines=False),
        host="teola.internal.example",
    )
    import httpx

    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=server),
        base_url="http://teola.internal.example",
        headers={"Authorization": "Bearer k"},
    ) as c:
        assert (await c.get("/v1/apps")).status_code == 200
        assert (await c.get("/v1/apps", headers={"Host": "other.example"})).status_code == 400


@pytest.mark.parametrize("ctype", ["text/plain", "application/x-www-form-urlencoded", None])
async def test_the_door_reads_only_json_bodies(ctype):
    async with serve_door() as (http, _, llm):
        headers = {"content-type": ctype} if ctype else {}
        request = http.build_request(
            "POST", "/v1/chat/completions", content=json.dumps(CHAT).encode(), headers=headers
        )
        assert ctype is not None or "content-type" not in request.headers
        r = await http.send(request)
        assert r.status_code == 415, r.text
        assert (
            r.json()["error"]["code"] == "unsupported_media_type"
            and "application/json" in r.json()["error"]["message"]
        )
        assert not llm.requests, "no LLM call was made"
        ok = await http.post(
            "/v1/chat/completions", json=CHAT, headers={"content-type": "application/json; charset=utf-8"}
        )
        assert ok.status_code == 200
