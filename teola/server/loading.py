"""Finding an app from the command line: a built-in name (``advanced_rag`` -> ``apps.advanced_rag.build()``)
or ``module:attr`` naming an App instance or a zero-argument callable returning one."""
from __future__ import annotations

import importlib
import os
import pkgutil
import sys
from typing import Any


class AppNotFound(LookupError):
    """The app spec names no app; the message lists the built-in apps."""


def builtin_apps() -> list[str]:
    """Names of the apps shipped in the `apps` package (each module with a `build()`)."""
    try:
        import apps
    except ImportError:
        return []
    return sorted(m.name for m in pkgutil.iter_modules(apps.__path__) if not m.ispkg and not m.name.startswith("_"))


def resolve_app(spec: str, **build_options: Any) -> Any:
    """The App `spec` names. A bare name imports ``apps.<name>`` and calls its ``build(**build_options)``;
    ``module:attr`` imports the module (the working directory is searched too) and takes the attribute
    (an App, or a callable returning one)."""
    from teola.app import App

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
                raise AppNotFound(f"cannot import module {module_name!r} for app {spec!r} (is it on PYTHONPATH?); "
                                  f"built-in apps: {', '.join(builtin_apps())}") from None
            raise
        if not hasattr(module, attr):
            raise AppNotFound(f"module {module_name!r} has no attribute {attr!r}")
        obj = getattr(module, attr)
    else:
        names = builtin_apps()
        if spec not in names:
            raise AppNotFound(f"unknown app {spec!r}; built-in apps: {', '.join(names) or 'none'} "
                              "(or give module:attr for your own)")
        module = importlib.import_module(f"apps.{spec}")
        obj = getattr(module, "build", None)
        if obj is None:
            raise AppNotFound(f"apps.{spec} has no build() function")
    if isinstance(obj, App):
        if build_options:
            raise ValueError(f"{spec!r} is an App instance; engine options apply only to a build function")
        return obj
    if callable(obj):
        app = obj(**build_options)
        if not isinstance(app, App):
            raise TypeError(f"{spec!r} returned {type(app).__name__}, not a teola App")
        return app
    raise TypeError(f"{spec!r} is a {type(obj).__name__}, not an App or a callable returning one")
