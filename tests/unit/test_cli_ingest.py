"""`teola ingest`, `teola documents list|delete` and `teola query --stream`, through the real command
line (`main([...])`) against the real server (create_server + uvicorn on 127.0.0.1, the echo app on
a sim engine, documents in memory)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path

import docx
import pytest

from teola.cli import main
from teola.cli_ingest import size_text
from teola.client import Client, events
from teola.server import ServerSettings
from tests.unit.client.conftest import served_in_thread
from tests.unit.server.test_server import make_echo_app


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    echo, llm = make_echo_app()
    with served_in_thread({"echo": echo}, ServerSettings(documents="memory", query_timeout=30)) as (
        url,
        loop,
    ):
        yield url
        loop.call_soon_threadsafe(llm.release.set)


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    root = tmp_path / "notes"
    (root / "sub").mkdir(parents=True)
    (root / "eiffel.md").write_text("# Eiffel\n\nThe tower is in **Paris**.\n")
    (root / "sub" / "page.html").write_text("<html><body><p>It opened in 1889.</p></body></html>")
    (root / "plain.txt").write_text("Gustave Eiffel's company built it.\n")
    document = docx.Document()
    document.add_paragraph("It is 330 metres tall.")
    document.save(root / "sub" / "facts.docx")
    (root / "picture.png").write_bytes(b"\x89PNG\r\n\x1a\n not really")
    (root / ".hidden.md").write_text("never sent")
    return root


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def ingest(capsys, url: str, folder: Path, *extra: str) -> tuple[int, dict]:
    code, out, _ = run(capsys, "ingest", str(folder), "--app", "echo", "--url", url, "--json", *extra)
    return code, json.loads(out)


def listed(capsys, url: str, *extra: str) -> list[dict]:
    code, out, _ = run(capsys, "documents", "list", "--app", "echo", "--url", url, "--json", *extra)
    assert code == 0
    return json.loads(out)


def test_ingest_is_idempotent_replaces_changed_files_and_lists_and_deletes(capsys, url, folder):
    code, first = ingest(capsys, url, folder, "--namespace", "paris")
    assert code == 0 and first["uploaded"]["files"] == 4 and first["failed"]["files"] == 0
    assert first["skipped"] == {"files": 1, "paths": [str(folder / "picture.png")]}
    assert first["text_bytes"] > 0 and first["uploaded"]["bytes"] == sum(
        p.stat().st_size
        for p in folder.rglob("*")
        if p.suffix in (".md", ".html", ".txt", ".docx") and not p.name.startswith(".")
    )
    docs = {d["name"]: d for d in listed(capsys, url)}
    assert set(docs) == {"notes/eiffel.md", "notes/plain.txt", "notes/sub/page.html", "notes/sub/facts.docx"}
    facts = docs["notes/sub/facts.docx"]
    assert facts["sha256"] == hashlib.sha256((folder / "sub" / "facts.docx").read_bytes()).hexdigest()
    assert facts["namespace"] == "paris" and facts["id"] == first["document_ids"]["notes/sub/facts.docx"]

    code, second = ingest(capsys, url, folder, "--namespace", "paris")
    assert code == 0 and second["uploaded"]["files"] == 0 and second["unchanged"]["files"] == 4

    (folder / "plain.txt").write_text("Gustave Eiffel's company designed and built it.\n")
    code, third = ingest(capsys, url, folder, "--namespace", "paris")
    assert code == 0 and third["uploaded"]["files"] == 1 and third["unchanged"]["files"] == 3
    assert third["replaced"] == [docs["notes/plain.txt"]["id"]]  # the older version is gone
    now = {d["name"]: d["id"] for d in listed(capsys, url, "--namespace", "paris")}
    assert len(now) == 4 and now["notes/plain.txt"] == third["document_ids"]["notes/plain.txt"]
    assert listed(capsys, url, "--namespace", "elsewhere") == []

    code, out, _ = run(capsys, "documents", "list", "--app", "echo", "--url", url)
    assert code == 0 and "notes/sub/facts.docx" in out and "4 document(s)" in out
    code, out, _ = run(capsys, "documents", "delete", now["notes/eiffel.md"], "--app", "echo", "--url", url)
    assert code == 0 and "deleted 1" in out
    assert {d["name"] for d in listed(capsys, url)} == set(now) - {"notes/eiffel.md"}
    code, _, err = run(capsys, "documents", "delete", now["notes/eiffel.md"], "--app", "echo", "--url", url)
    assert code == 1 and "unknown document id" in err

    code, out, _ = run(capsys, "documents", "delete", "--all", "--app", "echo", "--url", url)
    assert code == 0 and "deleted 3" in out and listed(capsys, url) == []


def test_the_plain_summary_and_failures(capsys, url, tmp_path):
    (tmp_path / "good.txt").write_text("A good text.")
    (tmp_path / "empty.md").write_text("   \n")  # no text: the server answers 422
    code, out, err = run(capsys, "ingest", str(tmp_path), "--app", "echo", "--url", url, "--concurrency", "2")
    assert code == 1, out + err
    assert out.splitlines()[0].split()[:2] == ["uploaded", "1"] and "failed  " in out and "empty.md" in out
    assert "HTTP 422" in out and "done in" in out
    assert "1/2" in err or "2/2" in err  # plain progress lines: stderr is not a terminal here
    run(capsys, "documents", "delete", "--all", "--app", "echo", "--url", url)


def test_usage_errors(capsys, url, tmp_path):
    code, _, err = run(capsys, "ingest", str(tmp_path / "missing"), "--app", "echo", "--url", url)
    assert code == 2 and "no such file or folder" in err
    code, _, err = run(capsys, "documents", "delete", "--app", "echo", "--url", url)
    assert code == 2 and "ids or --all" in err
    code, _, err = run(capsys, "ingest", str(tmp_path), "--app", "nope", "--url", url)
    assert code == 1 and "HTTP 404" in err
    code, _, err = run(capsys, "ingest", str(tmp_path), "--app", "echo", "--url", "http://127.0.0.1:9")
    assert code == 1 and "cannot reach" in err
    question = ("query", "nope", "--question", "Who?", "--url", url, "--stream")
    code, _, err = run(capsys, *question)
    assert code == 1 and "HTTP 404" in err
    code, _, err = run(capsys, *question, "--json")
    assert code == 2 and "choose one" in err


def test_query_stream_prints_tokens_then_timings(capsys, url):
    code, out, _ = run(
        capsys, "query", "echo", "--question", "Who designed the Eiffel Tower?", "--url", url, "--stream"
    )
    assert code == 0
    answer, _, rest = out.partition("\n\nquery ")
    assert "latency" in rest and "run ms" in rest
    with Client(url) as client, client.stream("echo", "Who designed the Eiffel Tower?") as stream:
        tokens = [e.text for e in stream if isinstance(e, events.Token)]
    assert len(tokens) > 1 and answer == "".join(tokens)  # the sim LLM's tokens, printed as they came


def test_size_text():
    assert [size_text(n) for n in (0, 999, 1234, 1_234_567)] == ["0 B", "999 B", "1.2 kB", "1.2 MB"]


def test_a_terminal_gets_a_progress_bar(monkeypatch, tmp_path):
    import io

    from teola import cli_ingest
    from teola.cli_ingest_files import LocalFile

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    err = Tty()
    monkeypatch.setattr(cli_ingest, "terminal_err", lambda: err)
    progress = cli_ingest.Progress(files=2, size=3000)
    progress.finished(LocalFile(tmp_path / "a.md", "t/a.md", 1000, "0" * 64), None)
    progress.finished(
        LocalFile(tmp_path / "b.md", "t/b.md", 2000, "1" * 64), "HTTP 422 (empty_document): empty"
    )
    progress.close()
    shown = err.getvalue()
    assert "ingest" in shown and "2/2 documents" in shown and "t/b.md failed: HTTP 422" in shown
