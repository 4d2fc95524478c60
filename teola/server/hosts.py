"""The Host allow-list: requests whose ``Host`` header names a host the server does not serve are
refused (400 ``host_not_allowed``) before anything else runs.

It stops DNS rebinding: a web page on ``evil.example`` can point its own name at 127.0.0.1 and so
reach a server on the visitor's machine as same-origin, but its requests still carry
``Host: evil.example``. Served by default: IP addresses (a page whose origin is an address was
served from that address), names without a dot (``localhost``, the machine's own name) and names
under ``.localhost`` and ``.test`` (reserved, RFC 6761): no public DNS name can be made to
resolve to them. Other names are served when listed in the ``allowed_hosts`` setting (``*`` lists
every host) or when they are the host the server binds (`create_server(host=...)`)."""

from __future__ import annotations

import ipaddress
import json
from typing import Any

from teola.server.openai.errors import door_response, is_door_path

RESERVED_SUFFIXES = (".localhost", ".test")
WILDCARD_BINDS = ("", "0.0.0.0", "::", "[::]")


class AllowedHosts:
    """Which ``Host`` values are served: the defaults above plus `listed` (``"a.example,*.corp.example"``;
    ``"*"``: all) and `bound` (the host the server binds, when it is a name)."""

    def __init__(self, listed: str | None = None, bound: str | None = None) -> None:
        names = [n.strip().lower().rstrip(".") for n in (listed or "").split(",") if n.strip()]
        self.any = "*" in names
        self.exact = {n for n in names if not n.startswith("*.")}
        self.suffixes = tuple(n[1:] for n in names if n.startswith("*."))
        if bound and bound not in WILDCARD_BINDS:
            self.exact.add(bound.lower().strip("[]"))

    def allows(self, host: str) -> bool:
        """Whether a request with this ``Host`` header value (port included or not) is served."""
        if self.any:
            return True
        name = hostname(host)
        if not name:
            return False
        if name in self.exact or name.endswith(self.suffixes + RESERVED_SUFFIXES) or "." not in name:
            return True
        return is_address(name)


def hostname(host: str) -> str:
    """The name of a ``Host`` header value: lower case, without port, brackets or a final dot."""
    host = host.strip().lower()
    if host.startswith("["):
        return host[1 : host.find("]")] if "]" in host else ""
    name, sep, port = host.rpartition(":")
    if sep and port.isdigit() and ":" not in name:
        host = name
    return host.rstrip(".")


def is_address(name: str) -> bool:
    """Whether `name` is an IPv4 or IPv6 address."""
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def is_loopback(host: str) -> bool:
    """Whether binding `host` serves this machine only."""
    name = hostname(host)
    if name == "localhost" or name.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


class HostMiddleware:
    """Refuses requests whose Host header `allowed` does not serve, before their key or body is read
    (400; several Host headers too). A request without one (HTTP/1.0) passes: browsers always send it."""

    def __init__(self, app: Any, allowed: AllowedHosts) -> None:
        self.app = app
        self.allowed = allowed

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or self.allowed.any:
            await self.app(scope, receive, send)
            return
        hosts = [v.decode("latin-1") for k, v in scope.get("headers") or () if k == b"host"]
        if len(hosts) > 1:
            detail = "the request carries several Host headers; send one"
        elif hosts and not self.allowed.allows(hosts[0]):
            detail = (
                f"host {hosts[0]!r:.100} is not served here; list it in the allowed_hosts setting (env "
                "TEOLA_ALLOWED_HOSTS, comma-separated) if this server is meant to answer to that name"
            )
        else:
            await self.app(scope, receive, send)
            return
        await _send_400(scope, send, detail)


async def _send_400(scope: dict[str, Any], send: Any, detail: str) -> None:
    if is_door_path(scope.get("path", "")):
        body = bytes(door_response(400, "host_not_allowed", detail).body)
    else:
        body = json.dumps({"error": "host_not_allowed", "detail": detail}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 400,
            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": body})
