"""Property-based: no malformed document upload reaches a 500. Deep nesting, bytes that are not
UTF-8, JSON of any other shape, wrong content types, empty bodies and documents, and bodies over the
size cap all get a JSON 4xx whose error names the problem, and nothing of them is stored."""

from __future__ import annotations

import json

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from teola.server import ServerSettings, create_server
from tests.unit.server.test_server import make_echo_app

CAP = 64 * 1024  # max_body_bytes of the server under test: deep nestings of 30,000 levels fit
URL = "/v1/apps/echo/documents"


@pytest.fixture(scope="module")
def client():
    app, _ = make_echo_app()
    server = create_server(
        {"echo": app}, ServerSettings(max_body_bytes=CAP, documents="memory", start_engines=False)
    )
    with TestClient(server, raise_server_exceptions=False) as c:
        yield c


def not_utf8(raw: bytes) -> bool:
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        return True
    return False


def nested(depth: int, open_: str, close: str) -> bytes:
    return (open_ * depth + close * depth).encode()


def valid_shape(value) -> bool:
    docs = value.get("documents") if isinstance(value, dict) else None
    return isinstance(docs, list) and all(isinstance(d, str) for d in docs) and any(d.strip() for d in docs)


JSON = "application/json"
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=12,
)
bad_bytes = st.binary(min_size=1, max_size=200).filter(not_utf8)

uploads = st.one_of(
    st.integers(1_000, 30_000).map(lambda n: (JSON, nested(n, "[", "]"))),
    st.integers(1_000, 30_000).map(lambda n: (JSON, b'{"documents": ' + nested(n, "[", "]") + b"}")),
    st.integers(1_000, 10_000).map(lambda n: (JSON, ('{"a":' * n + "1" + "}" * n).encode())),
    bad_bytes.map(lambda b: (JSON, b'{"documents": ["' + b + b'"]}')),
    bad_bytes.map(lambda b: ("text/plain", b)),
    bad_bytes.map(lambda b: (JSON, b)),
    json_values.filter(lambda v: not valid_shape(v)).map(lambda v: (JSON, json.dumps(v).encode())),
    st.lists(st.sampled_from(["", " ", "\n\t"]), min_size=1, max_size=3).map(
        lambda docs: (JSON, json.dumps({"documents": docs}).encode())
    ),
    st.sampled_from([JSON, "text/plain", "", "multipart/form-data; boundary=x"]).map(lambda t: (t, b"")),
    st.tuples(
        st.sampled_from(
            [
                "application/xml",
                "image/png",
                "application/octet-stream",
                "video/mp4",
                "application/x-www-form-urlencoded",
            ]
        ),
        st.binary(min_size=1, max_size=100),
    ),
    st.integers(CAP + 1, 4 * CAP).map(lambda n: ("text/plain", b"a" * n)),
    st.integers(CAP + 1, 4 * CAP).map(lambda n: (JSON, json.dumps({"documents": ["a" * n]}).encode())),
    st.binary(max_size=300).map(lambda b: ("multipart/form-data; boundary=zz", b)),
)


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(upload=uploads)
def test_no_malformed_upload_reaches_a_500(client, upload):
    ctype, body = upload
    headers = {"content-type": ctype} if ctype else {}
    response = client.post(URL, content=body, headers=headers)
    assert 400 <= response.status_code < 500, (response.status_code, response.text[:300])
    error = response.json()
    assert isinstance(error.get("error"), str) and error["error"]
    assert isinstance(error.get("detail"), str) and error["detail"]
    listed = client.get(URL).json()
    assert listed["documents"] == []  # nothing of a refused upload is stored


def test_each_kind_is_named(client):
    def code(ctype: str, body: bytes) -> tuple[int, str]:
        r = client.post(URL, content=body, headers={"content-type": ctype})
        return r.status_code, r.json()["error"]

    assert code(JSON, nested(10_000, "[", "]")) == (400, "malformed_json")
    assert code(JSON, b'{"documents": ["\xff"]}') == (400, "malformed_json")
    assert code("image/png", b"\x89PNG") == (415, "unsupported_media_type")
    assert code(JSON, b"") == (400, "empty_body")
    assert code(JSON, b'{"documents": ["  "]}') == (422, "empty_document")
    assert code("text/plain", b"a" * (CAP + 1))[0] == 413
