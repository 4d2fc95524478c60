"""What the client's calls return: plain dataclasses read from the server's JSON answers."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any


@dataclass(frozen=True, slots=True)
class QueryResult:
    """A finished query: the app's `output` (a string for most apps), one `trace` entry per primitive
    (op, engine, instance, timings), its `query_id` and its `latency` in seconds."""

    output: Any
    trace: list[dict[str, Any]]
    query_id: str
    latency: float

    @property
    def text(self) -> str | None:
        """The output when it is text, else None."""
        return self.output if isinstance(self.output, str) else None


@dataclass(frozen=True, slots=True)
class Document:
    """One stored document of the caller's tenant: its `id`, its size in UTF-8 `bytes`, when it was
    first uploaded (`created`, UTC), and what that upload said: the SHA-256 of what it sent (`sha256`:
    a file's bytes, or the text's UTF-8), the file's `name` and its `namespace` label (None when not
    given, or from a server before these fields)."""

    id: str
    bytes: int
    created: datetime
    sha256: str | None = None
    name: str | None = None
    namespace: str | None = None


@dataclass(frozen=True, slots=True)
class Usage:
    """What the caller's tenant stores over all apps, and its caps."""

    documents: int
    bytes: int
    max_documents: int
    max_bytes: int


@dataclass(frozen=True, slots=True)
class DocumentPage:
    """A page of the caller's documents of an app, in id order; pass `next_after` as ``after`` for the
    next page (None on the last one)."""

    documents: list[Document]
    next_after: str | None
    usage: Usage


@dataclass(frozen=True, slots=True)
class Namespace:
    """A namespace the caller's tenant keeps (``config.namespace``) and when a query first used it."""

    name: str
    created: datetime


@dataclass(frozen=True, slots=True)
class NamespaceList:
    """The caller's kept namespaces of an app, and how many its tenant may keep over all apps."""

    namespaces: list[Namespace]
    max_namespaces: int


@dataclass(frozen=True, slots=True)
class EngineInfo:
    """An engine an app registered: its name and kind (``vllm``, ``pgvector``, ...)."""

    name: str
    kind: str | None


@dataclass(frozen=True, slots=True)
class AppInfo:
    """A served app: its engines, its components and whether its engines are started."""

    name: str
    engines: list[EngineInfo]
    components: list[str]
    ready: bool


@dataclass(frozen=True, slots=True)
class Readiness:
    """``GET /readyz``: `ready` when every app's engines are started and healthy; `status` is
    ``ready``, ``starting`` or ``down``; `apps` maps each app to started-or-not; `down` names the
    engines (``app.engine``) that are down and restarting."""

    ready: bool
    status: str
    apps: dict[str, bool]
    down: dict[str, Any]
    detail: str | None


def parse_time(value: str) -> datetime:
    """An ISO 8601 time of the server's answers."""
    return datetime.fromisoformat(value)


def query_result(body: dict[str, Any]) -> QueryResult:
    return QueryResult(
        output=body.get("output"),
        trace=list(body.get("trace") or []),
        query_id=str(body.get("query_id", "")),
        latency=float(body.get("latency") or 0.0),
    )


def document_page(body: dict[str, Any]) -> DocumentPage:
    docs = [
        Document(
            id=d["id"],
            bytes=int(d["bytes"]),
            created=parse_time(d["created"]),
            sha256=d.get("sha256"),
            name=d.get("name"),
            namespace=d.get("namespace"),
        )
        for d in body["documents"]
    ]
    u = body["usage"]
    usage = Usage(
        documents=int(u["documents"]),
        bytes=int(u["bytes"]),
        max_documents=int(u["max_documents"]),
        max_bytes=int(u["max_bytes"]),
    )
    return DocumentPage(documents=docs, next_after=body.get("next_after"), usage=usage)


def namespace_list(body: dict[str, Any]) -> NamespaceList:
    kept = [Namespace(name=n["namespace"], created=parse_time(n["created"])) for n in body["namespaces"]]
    return NamespaceList(namespaces=kept, max_namespaces=int(body["max_namespaces"]))


def app_list(body: dict[str, Any]) -> list[AppInfo]:
    return [
        AppInfo(
            name=a["name"],
            engines=[EngineInfo(name=e["name"], kind=e.get("kind")) for e in a["engines"]],
            components=list(a["components"]),
            ready=bool(a["ready"]),
        )
        for a in body["apps"]
    ]


def readiness(body: dict[str, Any], status_code: int) -> Readiness:
    return Readiness(
        ready=status_code == 200 and body.get("status") == "ready",
        status=str(body.get("status", "")),
        apps=dict(body.get("apps") or {}),
        down=dict(body.get("down") or {}),
        detail=body.get("detail"),
    )
