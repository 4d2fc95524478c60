"""The connection options both clients take: the server's URL, the API key, timeouts, headers."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import httpx

DEFAULT_URL = "http://127.0.0.1:8000"
URL_ENV = "TEOLA_URL"
KEY_ENV = "TEOLA_API_KEY"
# a little over the server's default query limit (TEOLA_QUERY_TIMEOUT, 300 s), so its 504 comes first
DEFAULT_TIMEOUT = httpx.Timeout(330.0, connect=10.0)


def http_options(
    base_url: str | None,
    api_key: str | None,
    timeout: float | httpx.Timeout | None,
    headers: Mapping[str, str] | None,
) -> dict[str, Any]:
    """The keyword arguments of the httpx client: `base_url` (else ``$TEOLA_URL``, else
    http://127.0.0.1:8000), ``Authorization: Bearer`` `api_key` (else ``$TEOLA_API_KEY``, else none:
    a server without keys), `timeout` in seconds (None: wait forever), extra `headers`."""
    url = base_url or os.environ.get(URL_ENV) or DEFAULT_URL
    if not url.startswith(("http://", "https://")):
        raise ValueError(f"base_url must start with http:// or https://, got {url!r}")
    key = api_key if api_key is not None else os.environ.get(KEY_ENV)
    sent = {"user-agent": f"teola-client/{_version()}", **dict(headers or {})}
    if key:
        sent["authorization"] = f"Bearer {key}"
    return {"base_url": url.rstrip("/"), "timeout": timeout, "headers": sent}


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("teola")
    except PackageNotFoundError:
        return "0"
