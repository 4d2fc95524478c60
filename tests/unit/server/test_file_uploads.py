"""Files uploaded to POST /v1/apps/{app}/documents (raw body or multipart) are stored as their
extracted text; unreadable files get 422, files over a limit 413, unknown types 415, each naming
the problem. JSON and plain-text uploads are unchanged."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from teola.loaders.registry import DOCX_TYPE
from teola.server import ServerSettings, create_server
from tests.unit.loaders.files import make_docx, make_pdf
from tests.unit.server.test_server import make_echo_app

URL = "/v1/apps/echo/documents"
PDF = "application/pdf"


@pytest.fixture(scope="module")
def client():
    app, _ = make_echo_app()
    settings = ServerSettings(
        documents="memory",
        start_engines=False,
        max_file_pages=3,
        max_file_bytes=50_000,
        max_body_bytes=200_000,
        max_document_chars=5000,
    )
    with TestClient(create_server({"echo": app}, settings), raise_server_exceptions=False) as c:
        yield c


def stored(client: TestClient, response) -> list[str]:
    assert response.status_code == 201, response.text
    return [client.get(f"{URL}/{i}").text for i in response.json()["document_ids"]]


def refused(response, status: int, code: str) -> str:
    assert response.status_code == status, response.text
    body = response.json()
    assert body["error"] == code, body
    return body["detail"]


def test_raw_bodies_are_stored_as_text(client):
    def post(body: bytes, ctype: str):
        return stored(client, client.post(URL, content=body, headers={"content-type": ctype}))

    assert post(make_pdf(["Eiffel built it", "in 1889"]), PDF) == ["Eiffel built it\n\nin 1889"]
    assert post(b"<h1>Tower</h1><p>Paris <i>France</i></p><script>x()</script>", "text/html") == [
        "Tower\n\nParis France"
    ]
    assert post(b"# Tower\n\n*Paris*, [link](https://x.test)", "text/markdown") == ["Tower\n\nParis, link"]
    assert post(make_docx(["Gustave", "Eiffel"]), DOCX_TYPE) == ["Gustave\nEiffel"]


def test_multipart_files_by_type_or_extension(client):
    files = [
        ("files", ("a.pdf", make_pdf(["from a pdf"]), PDF)),
        ("files", ("b.docx", make_docx(["from a docx"]), "application/octet-stream")),
        ("files", ("c.md", b"**from markdown**", "application/octet-stream")),
        ("files", ("d.txt", b"from text", "text/plain")),
    ]
    texts = stored(client, client.post(URL, files=files, data={"document": "from a field"}))
    assert sorted(texts) == sorted(
        ["from a pdf", "from a docx", "from markdown", "from text", "from a field"]
    )


def test_json_and_plain_text_unchanged(client):
    assert stored(client, client.post(URL, json={"documents": ["# kept as is"]})) == ["# kept as is"]
    r = client.post(URL, content=b"<b>plain</b>", headers={"content-type": "text/plain"})
    assert stored(client, r) == ["<b>plain</b>"]


@pytest.mark.parametrize(
    "body, problem",
    [
        (make_pdf(["secret"], password="pw"), "encrypted_pdf"),
        (make_pdf(["a", "b"])[:300], "corrupt_file"),
        (make_pdf(["", ""]), "no_text"),
        (b"<html>not a pdf</html>", "not_a_pdf"),
    ],
)
def test_unreadable_pdfs_get_422(client, body, problem):
    before = client.get(URL).json()["usage"]["documents"]
    detail = refused(client.post(URL, content=body, headers={"content-type": PDF}), 422, problem)
    assert "(PDF)" in detail
    assert client.get(URL).json()["usage"]["documents"] == before


def test_unreadable_multipart_file_names_it(client):
    files = [("files", ("report.docx", b"not a zip", DOCX_TYPE))]
    detail = refused(client.post(URL, files=files), 422, "corrupt_file")
    assert "'report.docx' (DOCX)" in detail


def test_limits_get_413(client):
    detail = refused(
        client.post(URL, content=make_pdf(["1", "2", "3", "4"]), headers={"content-type": PDF}),
        413,
        "too_many_pages",
    )
    assert "4 pages; at most 3" in detail and "TEOLA_MAX_FILE_PAGES" in detail
    big = [("files", ("big.md", b"x" * 60_000, "text/markdown"))]
    assert "TEOLA_MAX_FILE_BYTES" in refused(client.post(URL, files=big), 413, "file_too_large")
    long = b"<p>" + b"word " * 1200 + b"</p>"
    detail = refused(
        client.post(URL, content=long, headers={"content-type": "text/html"}), 413, "text_too_long"
    )
    assert "at most 5000" in detail and "TEOLA_MAX_DOCUMENT_CHARS" in detail


def test_unsupported_types_get_415_naming_the_supported_ones(client):
    detail = refused(
        client.post(URL, content=b"\x89PNG", headers={"content-type": "image/png"}),
        415,
        "unsupported_media_type",
    )
    assert "application/pdf" in detail and "text/markdown" in detail and DOCX_TYPE in detail
    files = [("files", ("p.png", b"\x89PNG", "image/png"))]
    assert "'p.png'" in refused(client.post(URL, files=files), 415, "unsupported_media_type")


def test_refused_uploads_store_nothing(client):
    before = client.get(URL).json()["usage"]["documents"]
    files = [("files", ("ok.txt", b"fine", "text/plain")), ("files", ("bad.pdf", b"%PDF-1.4 junk", PDF))]
    refused(client.post(URL, files=files), 422, "corrupt_file")
    assert client.get(URL).json()["usage"]["documents"] == before


def test_empty_file_body(client):
    refused(client.post(URL, content=b"", headers={"content-type": PDF}), 400, "empty_body")
