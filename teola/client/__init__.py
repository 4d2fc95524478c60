"""A Python client of a teola server's native HTTP API (docs/client.md): `Client` (blocking) and
`AsyncClient` (asyncio), over httpx. Queries (whole or streamed as typed events,
`teola.client.events`), documents, kept namespaces, apps and health; error answers raise the
exceptions of `teola.client.errors`; 429 and 503 are retried after their ``Retry-After`` (`Retries`).

    from teola.client import Client

    with Client("http://127.0.0.1:8000", api_key="...") as client:
        print(client.query("advanced_rag", "Who designed the Eiffel Tower?", documents=[...]).output)
"""

from teola.client import events
from teola.client.async_client import AsyncClient, AsyncQueryStream
from teola.client.client import Client, QueryStream
from teola.client.errors import (
    APIConnectionError,
    APIError,
    AuthenticationError,
    InvalidRequestError,
    NotFoundError,
    RateLimitError,
    ServerError,
    TeolaError,
    TimeoutError,  # noqa: F401  (by name only: see __all__ below)
    UnavailableError,
)
from teola.client.results import (
    AppInfo,
    Document,
    DocumentPage,
    EngineInfo,
    Namespace,
    NamespaceList,
    QueryResult,
    Readiness,
    Usage,
)
from teola.client.retries import NO_RETRIES, Retries

# TimeoutError is left out of __all__: a star import would shadow the builtin (import it by name)
__all__ = [
    "Client",
    "AsyncClient",
    "QueryStream",
    "AsyncQueryStream",
    "events",
    "Retries",
    "NO_RETRIES",
    "TeolaError",
    "APIConnectionError",
    "APIError",
    "AuthenticationError",
    "NotFoundError",
    "InvalidRequestError",
    "RateLimitError",
    "ServerError",
    "UnavailableError",
    "QueryResult",
    "Document",
    "DocumentPage",
    "Usage",
    "Namespace",
    "NamespaceList",
    "AppInfo",
    "EngineInfo",
    "Readiness",
]
