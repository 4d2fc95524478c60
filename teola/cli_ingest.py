"""`teola ingest PATH... --app A`: upload files and folders to a server's documents, a few at a
time, skipping what it already has (by content hash), with a progress bar and a summary.

The server converts each file to text (PDF, HTML, Markdown, DOCX, text; teola.loaders) and stores it
with the SHA-256 of the file's bytes and its name; `ingest` lists those first, so a file whose hash
is stored is not sent again, from this machine or another. A changed file is uploaded and its older
version (same name and namespace) deleted. The server does not chunk at upload (queries chunk), so
progress counts documents and bytes; the summary adds the bytes of text the server extracted."""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from dataclasses import dataclass, field
from typing import Any

from teola.cli_ingest_files import LocalFile, Plan, find_files, hash_files, make_plan
from teola.cli_logging import terminal_err, terminal_out
from teola.cli_remote import RemoteCliError, add_server_options, client_from, server_errors
from teola.client import AsyncClient, NotFoundError, TeolaError

DEFAULT_CONCURRENCY = 4


@dataclass(slots=True)
class Outcome:
    """What an ingest did: files uploaded (with their new ids), failed (with why), older versions
    deleted, and older versions it could not delete (a warning: the new version is stored)."""

    uploaded: list[tuple[LocalFile, str]] = field(default_factory=list)
    failed: list[tuple[LocalFile, str]] = field(default_factory=list)
    replaced: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


class Progress:
    """A tqdm bar of bytes sent (and documents done) on stderr when it is a terminal; otherwise one
    plain line per finished file."""

    def __init__(self, files: int, size: int) -> None:
        self.files, self.done = files, 0
        err = terminal_err()
        self.bar = None
        if err.isatty() and files:
            from tqdm import tqdm

            self.bar = tqdm(total=size, unit="B", unit_scale=True, desc="ingest", file=err, leave=False)
            self.bar.set_postfix_str(f"0/{files} documents")

    def finished(self, f: LocalFile, problem: str | None) -> None:
        """One file is done: uploaded, or failed with `problem`."""
        self.done += 1
        if self.bar is None:
            status = f"failed: {problem}" if problem else f"uploaded ({size_text(f.size)})"
            print(f"[teola] {self.done}/{self.files} {f.name} {status}", file=terminal_err(), flush=True)
            return
        self.bar.update(f.size)
        self.bar.set_postfix_str(f"{self.done}/{self.files} documents")
        if problem:
            self.bar.write(f"[teola] {f.name} failed: {problem}", file=terminal_err())

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def cmd_ingest(args: argparse.Namespace) -> int:
    """Upload the supported files under the given paths; exit code 1 when any failed."""
    if args.concurrency < 1:
        raise RemoteCliError(f"--concurrency must be at least 1, got {args.concurrency}", 2)
    t0 = time.perf_counter()
    args.namespace = args.namespace or None  # an empty label is no label, as on the server
    try:
        found, skipped = find_files(args.paths)
    except ValueError as exc:
        raise RemoteCliError(str(exc), 2) from None
    files = hash_files(found, skipped)
    with client_from(args) as client, server_errors(f"listing the documents of app {args.app!r}", client):
        stored = list(client.iter_documents(args.app, page_size=1000))
    plan = make_plan(files, stored, args.namespace, skipped)
    if args.dry_run:
        outcome = Outcome(uploaded=[(f, "") for f, _ in plan.upload])
        text_bytes = None
    else:
        outcome = asyncio.run(_upload_all(args, plan))
        text_bytes = _text_bytes(args, outcome) if outcome.uploaded else 0
    _print_summary(args, plan, outcome, text_bytes, time.perf_counter() - t0)
    return 1 if outcome.failed else 0


async def _upload_all(args: argparse.Namespace, plan: Plan) -> Outcome:
    outcome = Outcome()
    progress = Progress(len(plan.upload), sum(f.size for f, _ in plan.upload))
    gate = asyncio.Semaphore(args.concurrency)
    try:
        async with AsyncClient(args.url, args.api_key) as client:

            async def one(f: LocalFile, older: list[str]) -> None:
                async with gate:
                    problem = await _upload_one(client, args, f, older, outcome)
                progress.finished(f, problem)

            await asyncio.gather(*(one(f, older) for f, older in plan.upload))
    finally:
        progress.close()
    return outcome


async def _upload_one(
    client: AsyncClient, args: argparse.Namespace, f: LocalFile, older: list[str], outcome: Outcome
) -> str | None:
    """Send one file (the client retries 429, 503 and broken connections) and delete its older
    versions; the problem when it failed, else None."""
    try:
        data = await asyncio.to_thread(f.path.read_bytes)
        [doc_id] = await client.upload_files(args.app, (f.name, data), namespace=args.namespace)
    except (OSError, TeolaError) as exc:
        problem = _problem(exc)
        outcome.failed.append((f, problem))
        return problem
    outcome.uploaded.append((f, doc_id))
    for old in older:
        if old == doc_id:  # other bytes, same text: the server kept one document
            continue
        try:
            await client.delete_document(args.app, old)
            outcome.replaced.append(old)
        except NotFoundError:
            pass  # deleted meanwhile, e.g. by a concurrent ingest
        except TeolaError as exc:
            outcome.warnings.append(
                f"{f.name}: its older version {old} is kept: deleting it failed: {_problem(exc)}"
            )
    return None


def _problem(exc: Exception) -> str:
    status = getattr(exc, "status", None)
    if status is not None:
        return f"HTTP {status} ({getattr(exc, 'code', '')}): {getattr(exc, 'message', exc)}"
    return getattr(exc, "strerror", None) or str(exc) or type(exc).__name__


def _text_bytes(args: argparse.Namespace, outcome: Outcome) -> int | None:
    """Bytes of text the server extracted from the uploaded files (its listing); None if unknown."""
    new = {doc_id for _, doc_id in outcome.uploaded}
    try:
        with client_from(args) as client:
            return sum(d.bytes for d in client.iter_documents(args.app, page_size=1000) if d.id in new)
    except TeolaError:
        return None


def _print_summary(
    args: argparse.Namespace, plan: Plan, outcome: Outcome, text_bytes: int | None, seconds: float
) -> None:
    rows = [
        ("uploaded", [f for f, _ in outcome.uploaded]),
        ("unchanged", plan.unchanged),
        ("failed", [f for f, _ in outcome.failed]),
    ]
    out = terminal_out()
    if args.json:
        body = {name: {"files": len(fs), "bytes": sum(f.size for f in fs)} for name, fs in rows}
        body["skipped"] = {"files": len(plan.skipped), "paths": [p for p, _ in plan.skipped]}
        body.update(
            text_bytes=text_bytes,
            replaced=outcome.replaced,
            warnings=outcome.warnings,
            seconds=round(seconds, 3),
            failures={f.name: why for f, why in outcome.failed},
            document_ids={f.name: i for f, i in outcome.uploaded if i},
        )
        print(json.dumps(body, indent=2), file=out, flush=True)
        return
    verb = "would upload" if args.dry_run else "uploaded"
    print(
        f"{verb:<12} {len(outcome.uploaded):>5} files  {size_text(sum(f.size for f in rows[0][1])):>9}",
        file=out,
    )
    print(
        f"{'unchanged':<12} {len(plan.unchanged):>5} files  "
        f"{size_text(sum(f.size for f in plan.unchanged)):>9}",
        file=out,
    )
    print(f"{'skipped':<12} {len(plan.skipped):>5} files", file=out)
    print(
        f"{'failed':<12} {len(outcome.failed):>5} files  {size_text(sum(f.size for f in rows[2][1])):>9}",
        file=out,
    )
    for path, why in plan.skipped:
        print(f"  skipped {path}: {why}", file=out)
    for f, why in outcome.failed:
        print(f"  failed  {f.name}: {why}", file=out)
    for warning in outcome.warnings:
        print(f"  warning {warning}", file=out)
    extra = f"; {size_text(text_bytes)} of text stored" if text_bytes else ""
    extra += f"; {len(outcome.replaced)} older version(s) deleted" if outcome.replaced else ""
    where = f"app {args.app!r}" + (f", namespace {args.namespace!r}" if args.namespace else "")
    print(f"{where}: done in {seconds:.2f} s{extra}", file=out, flush=True)


def size_text(n: int) -> str:
    """1234567 -> '1.2 MB'."""
    if n < 1000:
        return f"{n} B"
    size = float(n)
    for unit in ("kB", "MB", "GB"):  # noqa: B007  (the last unit is read after the loop)
        size /= 1000
        if size < 1000:
            break
    return f"{size:.1f} {unit}"


def add_commands(sub: Any) -> None:
    """Add `ingest` to the `teola` parser's subcommands."""
    sp = sub.add_parser(
        "ingest", help="upload files and folders to an app's documents (skips unchanged files)"
    )
    sp.add_argument(
        "paths", nargs="+", metavar="PATH", help="files and folders (recursed; hidden files skipped)"
    )
    sp.add_argument("--app", required=True, help="the app on the server")
    sp.add_argument(
        "--namespace",
        default=None,
        help="a label stored with each new document (listed and "
        "filtered by `teola documents`); not a vector-store namespace",
    )
    sp.add_argument(
        "--concurrency", type=int, default=DEFAULT_CONCURRENCY, help="uploads at once (default 4)"
    )
    sp.add_argument("--dry-run", action="store_true", help="list what would be uploaded; send nothing")
    sp.add_argument("--json", action="store_true", help="print the summary as JSON")
    add_server_options(sp)
    sp.set_defaults(handler=cmd_ingest)
