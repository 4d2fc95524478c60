"""`KeyMiddleware`: the API key is checked from the request's headers before anything reads its
body, so a caller without a valid key costs the server one header lookup, not a buffered body of
up to ``max_body_bytes``. The routes' own key check (teola.server.api) then finds the tenant set."""

from __future__ import annotations

from typing import Any

from teola.server.errors import ApiError, error_response
from teola.server.tenants import Tenants

# open without a key: the probes, the OpenAPI description and the /ui page (it holds no data)
PUBLIC_PATHS = frozenset(
    {"/healthz", "/readyz", "/openapi.json", "/docs", "/docs/oauth2-redirect", "/redoc", "/ui"}
)
PUBLIC_PREFIXES = ("/ui/static/",)


def is_public(path: str) -> bool:
    """Whether `path` is served without an API key."""
    return path in PUBLIC_PATHS or path.startswith(PUBLIC_PREFIXES)


def unauthorized(detail: str = "missing or wrong API key: send 'Authorization: Bearer <key>'") -> ApiError:
    """The 401 of a request without a valid key."""
    return ApiError(401, "unauthorized", detail, headers={"WWW-Authenticate": "Bearer"})


class KeyMiddleware:
    """401 for a request to a key-protected path without a valid key (400 for several
    ``Authorization`` headers, which would leave it unclear whose request it is)."""

    def __init__(self, app: Any, tenants: Tenants) -> None:
        self.app = app
        self.tenants = tenants

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        path = scope.get("path", "")
        if scope["type"] != "http" or is_public(path):
            await self.app(scope, receive, send)
            return
        given = [v.decode("latin-1") for k, v in scope.get("headers") or () if k == b"authorization"]
        if len(given) > 1:
            error = ApiError(
                400,
                "duplicate_authorization",
                f"the request carries {len(given)} Authorization "
                "headers; send one: 'Authorization: Bearer <key>'",
            )
        elif self.tenants.caller(given[0] if given else "") is None:
            error = unauthorized()
        else:
            await self.app(scope, receive, send)
            return
        await error_response(path, error)(scope, receive, send)
