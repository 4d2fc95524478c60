"""What a door request's `model` names: `<app>` or `<app>/<engine>`, resolved among the served apps.

The chat / completions door and `/v1/embeddings` resolve models the same way and differ only in which
engines count (LLM engines or embedding engines) and which engine name a bare app name prefers.
"""

from __future__ import annotations

from typing import Any

from teola.ir.ops import PrimOp
from teola.server.errors import ApiError
from teola.server.state import ServerState


def engines_running(app: Any, op: str) -> list[str]:
    """The app's engines whose declared ops include `op` (e.g. "decoding", "embedding")."""
    return [name for name, spec in app.engines.items() if op in {getattr(o, "value", o) for o in spec.ops}]


def resolve(state: ServerState, model: Any, op: str, preferred: str, what: str) -> tuple[str, Any, str]:
    """The app's name, the app and the engine that `model` names among engines running `op`.

    A bare app name picks the engine called `preferred`, or the app's only such engine. A model that
    is not a non-empty string is a 400; one naming nothing served is a 404 listing what is served.
    """
    if not isinstance(model, str) or not model:
        raise ApiError(
            400, "invalid_request", f"model must name an app served here (or '<app>/<{what}>')", param="model"
        )
    app_name, _, engine = model.partition("/")
    app = state.apps.get(app_name)
    engines = engines_running(app, op) if app is not None else []
    if not engine:
        engine = preferred if preferred in engines else engines[0] if len(engines) == 1 else ""
    if app is None or engine not in engines:
        served = [f"{n}/{e}" for n, a in sorted(state.apps.items()) for e in engines_running(a, op)]
        label = "unknown model" if op == PrimOp.DECODING else f"unknown {op} model"
        raise ApiError(
            404, "model_not_found", f"{label} {model!r}; served: {', '.join(served) or 'none'}", param="model"
        )
    return app_name, app, engine
