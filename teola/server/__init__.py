"""teola's HTTP server: `create_server(apps, settings)` -> a FastAPI application (see teola.server.api)."""

from teola.server.api import ApiError, create_server
from teola.server.loading import builtin_apps, resolve_app
from teola.server.settings import ServerSettings

__all__ = ["ApiError", "ServerSettings", "builtin_apps", "create_server", "resolve_app"]
