"""Native extensions built by `csrc/build.sh` (run by scripts/setup.sh). Nothing here is required:
callers fall back to pure-torch code when an extension is missing."""

from __future__ import annotations

import importlib
from types import ModuleType

_kvswap: ModuleType | None = None
_kvswap_error: str | None = None


def load_kvswap() -> ModuleType:
    """Import the `teola_kvswap` extension (which registers `torch.ops.teola_kvswap.*`) and return it.

    Raises ImportError saying how to build it when it is missing or fails to load.
    """
    global _kvswap, _kvswap_error
    if _kvswap is not None:
        return _kvswap
    if _kvswap_error is None:
        try:
            import torch  # noqa: F401  (loads libtorch before the extension)

            _kvswap = importlib.import_module("engines.kvswap._native.teola_kvswap")
            return _kvswap
        except ImportError as exc:
            _kvswap_error = str(exc)
    raise ImportError(
        f"the teola_kvswap extension is not available ({_kvswap_error}); "
        "build it with `bash csrc/build.sh` (scripts/setup.sh does this)"
    )


def kvswap_available() -> bool:
    """Whether the `teola_kvswap` extension loads."""
    try:
        load_kvswap()
        return True
    except ImportError:
        return False
