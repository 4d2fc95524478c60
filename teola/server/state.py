"""`ServerState`: what the endpoints of one server share (apps, settings, metrics, uploads)."""
from __future__ import annotations

from typing import Any, Mapping

from teola.server.documents import DocumentStore
from teola.server.errors import ApiError
from teola.server.metrics import ServerMetrics
from teola.server.recent import RecentQueries
from teola.server.settings import ServerSettings
from teola.server.tenants import Tenants


class ServerState:
    """What the endpoints share: the apps, the settings, metrics, uploaded documents and recent queries."""

    def __init__(self, apps: Mapping[str, Any], settings: ServerSettings) -> None:
        self.apps = dict(apps)
        self.settings = settings
        self.metrics = ServerMetrics(lambda: self.apps)
        self.documents = DocumentStore(settings.max_stored_documents)
        self.tenants = Tenants.from_settings(settings.api_key, settings.api_keys, settings.api_keys_file,
                                             settings.secret)
        self.recent = RecentQueries()  # what the /ui page shows (teola.server.ui)
        self.started = False

    def app(self, name: str) -> Any:
        """The app served as `name`; ApiError 404 naming the served apps otherwise."""
        app = self.apps.get(name)
        if app is None:
            raise ApiError(404, "unknown_app", f"unknown app {name!r}; apps served here: "
                           f"{', '.join(sorted(self.apps)) or 'none'}")
        return app
