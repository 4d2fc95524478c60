"""What both clients set up the same way: the httpx client on the server's URL with its key, timeout
and headers, the retry policy, and the URL they report. `Client` and `AsyncClient` differ only in
how they send, read and wait."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Generic, TypeVar

import httpx

from teola.client.options import http_options
from teola.client.retries import Retries

H = TypeVar("H", httpx.Client, httpx.AsyncClient)


class Connection(Generic[H]):
    """An httpx client of class `http_class` built from the connection options
    (`teola.client.options.http_options`) with `transport`, and the retry policy (default
    `Retries()`)."""

    def __init__(
        self,
        http_class: type[H],
        base_url: str | None,
        api_key: str | None,
        *,
        timeout: float | httpx.Timeout | None,
        retries: Retries | None,
        headers: Mapping[str, str] | None,
        transport: Any,
    ) -> None:
        self.retries = retries if retries is not None else Retries()
        self._http: H = http_class(transport=transport, **http_options(base_url, api_key, timeout, headers))

    @property
    def base_url(self) -> str:
        """The server's URL."""
        return str(self._http.base_url).rstrip("/")
