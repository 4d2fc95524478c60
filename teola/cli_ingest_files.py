"""What `teola ingest` reads and decides before it sends anything: the files under the given paths,
their SHA-256, and for each one whether the server already has it (by content hash), has an older
version of it (same name and namespace, other hash), or not at all."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from teola.client import Document
from teola.loaders.registry import BY_EXTENSION


@dataclass(frozen=True, slots=True)
class LocalFile:
    """A file to ingest: where it is, the name it is stored under, its size and SHA-256."""

    path: Path
    name: str
    size: int
    sha256: str


@dataclass(slots=True)
class Plan:
    """The files to upload (each with the ids of its older versions to delete after), those the
    server already has, and those skipped here (path, reason)."""

    upload: list[tuple[LocalFile, list[str]]] = field(default_factory=list)
    unchanged: list[LocalFile] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)


def find_files(paths: Iterable[str]) -> tuple[list[tuple[Path, str]], list[tuple[str, str]]]:
    """(path, stored name) of every supported file under `paths` (folders recursed, hidden files and
    folders left out), and (path, reason) of the unsupported ones. A folder's files are named
    `<folder>/<path inside it>`, a file given directly by its own name, so the same tree ingested
    from another directory or machine gets the same names. ValueError for a path that does not exist."""
    found: list[tuple[Path, str]] = []
    skipped: list[tuple[str, str]] = []
    for raw in paths:
        root = Path(raw)
        if root.is_file():
            entries = [(root, root.name)]
        elif root.is_dir():
            top = root.resolve().name
            entries = [
                (p, f"{top}/{p.relative_to(root).as_posix()}")
                for p in sorted(root.rglob("*"))
                if p.is_file() and not any(part.startswith(".") for part in p.relative_to(root).parts)
            ]
        else:
            raise ValueError(f"no such file or folder: {raw!r}")
        for path, name in entries:
            if path.suffix.lower() in BY_EXTENSION:
                found.append((path, name))
            else:
                skipped.append((str(path), f"unsupported type {path.suffix or '(no extension)'!r}"))
    return found, skipped


def hash_files(found: list[tuple[Path, str]], skipped: list[tuple[str, str]]) -> list[LocalFile]:
    """The `LocalFile` of each found file; one that cannot be read is added to `skipped`."""
    files = []
    for path, name in found:
        try:
            data = path.read_bytes()
        except OSError as exc:
            skipped.append((str(path), f"cannot read: {exc.strerror}"))
            continue
        files.append(LocalFile(path, name, len(data), hashlib.sha256(data).hexdigest()))
    return files


def make_plan(
    files: list[LocalFile], stored: list[Document], namespace: str | None, skipped: list[tuple[str, str]]
) -> Plan:
    """Decide per file: unchanged when a stored document has its SHA-256 (whatever its name), else
    upload; a stored document of the same name and namespace with another hash is its older version,
    deleted after the upload unless another file here still has that content."""
    plan = Plan(skipped=skipped)
    stored_hashes = {d.sha256 for d in stored if d.sha256}
    local_hashes = {f.sha256 for f in files}
    by_name: dict[str, list[Document]] = {}
    for doc in stored:
        if doc.name is not None and doc.namespace == namespace:
            by_name.setdefault(doc.name, []).append(doc)
    for f in files:
        if f.sha256 in stored_hashes:
            plan.unchanged.append(f)
            continue
        older = [d.id for d in by_name.get(f.name, []) if d.sha256 not in local_hashes]
        plan.upload.append((f, older))
    return plan
