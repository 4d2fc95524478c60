"""Process memory of a long-running server: glibc's malloc arenas.

glibc gives each thread that allocates its own malloc arena (up to 8 per core); memory freed in one
arena is not reused by threads on another and is rarely returned to the system. A server whose
worker threads (graph compilation, sentence-transformers batches) change from query to query keeps
growing: measured with `python -m bench load` (100 concurrent queries per wave, naive RAG;
bench/results/overheads/load_glibc_arenas.md and load.md), the server's RSS
grew +216 and +293 MiB over two waves with glibc's default and +8 and +72 MiB with 2 arenas (while
Python's own allocations, per tracemalloc, did not grow). `limit_malloc_arenas` sets that cap at run
time (`mallopt(M_ARENA_MAX)`), as the environment variable MALLOC_ARENA_MAX would at start-up."""

from __future__ import annotations

import ctypes
import ctypes.util
import logging

log = logging.getLogger("teola.server")

M_ARENA_MAX = -8  # glibc's mallopt parameter number


def limit_malloc_arenas(n: int) -> bool:
    """Cap glibc's malloc arenas at `n` for this process; False (and nothing changed) when the C
    library is not glibc or refuses."""
    name = ctypes.util.find_library("c")
    if not name:
        return False
    try:
        libc = ctypes.CDLL(name)
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    ok = bool(mallopt(M_ARENA_MAX, n))
    if not ok:
        log.warning("mallopt(M_ARENA_MAX, %d) refused; the server keeps glibc's default malloc arenas", n)
    return ok
