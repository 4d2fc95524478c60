"""Where teola keeps prepared models and engine caches.

`cache_dir()` is `$TEOLA_CACHE_DIR` if set; otherwise `<repo root>/.cache` when running from a source
checkout (a directory holding pyproject.toml above the `engines` package), else `~/.cache/teola`.
"""

from __future__ import annotations

import os
from pathlib import Path


def source_root() -> Path | None:
    """The source checkout holding this package, or None when installed as a wheel."""
    root = Path(__file__).resolve().parents[2]  # engines/assets/paths.py -> the checkout
    return root if (root / "pyproject.toml").is_file() else None


def cache_dir() -> Path:
    """The cache directory (created if missing)."""
    env = os.environ.get("TEOLA_CACHE_DIR")
    if env:
        path = Path(env).expanduser()
    else:
        root = source_root()
        path = root / ".cache" if root is not None else Path.home() / ".cache" / "teola"
    path.mkdir(parents=True, exist_ok=True)
    return path


def models_dir() -> Path:
    """Where prepared model folders live."""
    path = cache_dir() / "models"
    path.mkdir(parents=True, exist_ok=True)
    return path


def configure_engine_env() -> None:
    """Offline, cache-local defaults for engine libraries; values already set by the user win.

    HF_HUB_OFFLINE / TRANSFORMERS_OFFLINE: nothing is downloaded from a model hub.
    VLLM_CACHE_ROOT: vLLM's compile/cache files go inside `cache_dir()`.
    """
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("VLLM_CACHE_ROOT", str(cache_dir() / "vllm"))
