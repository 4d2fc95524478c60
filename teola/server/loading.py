"""Finding an app from the command line: a built-in name (``advanced_rag`` -> ``apps.advanced_rag.build()``)
or ``module:attr`` naming an App instance or a zero-argument callable returning one.

Built-in names are the modules of the apps package: ``apps`` (the shipped apps of a checkout) unless
``TEOLA_APPS_PACKAGE`` names another package; it is looked up by name, so teola itself does not
depend on any app."""

from __future__ import annotations

import importlib
import inspect
import json
import os
import pkgutil
import sys
from typing import Any

DEFAULT_APPS_PACKAGE = "apps"


def apps_package() -> str:
    """The package whose modules are the built-in apps (env TEOLA_APPS_PACKAGE, default "apps")."""
    return os.environ.get("TEOLA_APPS_PACKAGE") or DEFAULT_APPS_PACKAGE


class AppNotFound(LookupError):
    """The app spec names no app; the message lists the built-in apps."""


def builtin_apps() -> list[str]:
    """Names of the apps in the apps package (each module with a `build()`)."""
    try:
        package = importlib.import_module(apps_package())
    except ImportError:
        return []
    return sorted(
        m.name for m in pkgutil.iter_modules(package.__path__) if not m.ispkg and not m.name.startswith("_")
    )


def resolve_app(spec: str, **build_options: Any) -> Any:
    """The App `spec` names. A bare name imports ``apps.<name>`` and calls its ``build(**build_options)``;
    ``module:attr`` imports the module (the working directory is searched too) and takes the attribute
    (an App, or a callable returning one)."""
    from teola.api.app import App

    if not isinstance(spec, str) or not spec:
        raise AppNotFound(f"no app given; built-in apps: {', '.join(builtin_apps())}")
    if ":" in spec:
        module_name, _, attr = spec.partition(":")
        if os.getcwd() not in sys.path and "" not in sys.path:
            sys.path.insert(0, os.getcwd())  # like `python -m` and uvicorn: modules in the working directory
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name and module_name.startswith(exc.name):
                raise AppNotFound(
                    f"cannot import module {module_name!r} for app {spec!r} (is it on PYTHONPATH?); "
                    f"built-in apps: {', '.join(builtin_apps())}"
                ) from None
            raise
        if not hasattr(module, attr):
            raise AppNotFound(f"module {module_name!r} has no attribute {attr!r}")
        obj = getattr(module, attr)
    else:
        names = builtin_apps()
        if spec not in names:
            raise AppNotFound(
                f"unknown app {spec!r}; built-in apps: {', '.join(names) or 'none'} "
                "(or give module:attr for your own)"
            )
        module = importlib.import_module(f"{apps_package()}.{spec}")
        obj = getattr(module, "build", None)
        if obj is None:
            raise AppNotFound(f"{apps_package()}.{spec} has no build() function")
    if isinstance(obj, App):
        if build_options:
            raise ValueError(f"{spec!r} is an App instance; engine options apply only to a build function")
        return obj
    if callable(obj):
        app = obj(**(env_engine_options(obj) | build_options))
        if not isinstance(app, App):
            raise TypeError(f"{spec!r} returned {type(app).__name__}, not a teola App")
        return app
    raise TypeError(f"{spec!r} is a {type(obj).__name__}, not an App or a callable returning one")


ENGINE_OPTIONS_ENV = "TEOLA_ENGINE_OPTIONS"


def env_engine_options(build: Any) -> dict[str, Any]:
    """Engine options from ``$TEOLA_ENGINE_OPTIONS``, a JSON object {engine: {option: value}} passed to
    an app's build function (e.g. ``{"llm": {"kind": "openai", "url": "http://gpu-box:8000"}}`` runs a
    built-in app's LLM on a `vllm serve`). Engines the build function does not take are an error."""
    raw = os.environ.get(ENGINE_OPTIONS_ENV, "").strip()
    if not raw:
        return {}
    try:
        options = json.loads(raw)
    except ValueError as exc:
        raise ValueError(f"${ENGINE_OPTIONS_ENV} is not JSON: {exc}") from None
    if not isinstance(options, dict) or not all(isinstance(v, dict) for v in options.values()):
        raise ValueError(
            f"${ENGINE_OPTIONS_ENV} must be a JSON object {{engine: {{option: value}}}}, got {raw[:80]!r}"
        )
    params = inspect.signature(build).parameters
    unknown = sorted(set(options) - set(params))
    if unknown and not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        raise ValueError(
            f"${ENGINE_OPTIONS_ENV} names engine(s) {unknown} the app's build function does not take; "
            f"it takes {sorted(params)}"
        )
    return options
