"""`CompilePool`: the threads that compile queries for the server (teola.server.queries.compile_query).

Compilation is CPU work in a thread so the event loop keeps serving. It runs in a pool of its own,
not the loop's default executor that synchronous tools and the document store share, so a flood of
slow compilations cannot starve them. A thread cannot be stopped: a compilation whose query already
got its 504 runs on, so the pool counts it (and the tenant's slot stays taken) until its thread
really ends, and a pool with `threads` running and `backlog` waiting refuses more with 503."""
from __future__ import annotations

import asyncio
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Callable

from teola.server.errors import ApiError

COMPILE_RETRY_AFTER = 1  # seconds a client refused for a full pool waits


class CompilePool:
    """At most `threads` compilations at once and `backlog` waiting for a thread."""

    def __init__(self, threads: int, backlog: int) -> None:
        self.threads = threads
        self.backlog = backlog
        self.pending = 0  # submitted and not ended (running or waiting); changed on the event loop only
        self._executor = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="teola-compile")

    def submit(self, fn: Callable[..., Any], *args: Any, on_end: Callable[[], None] | None = None) -> Future:
        """Run `fn(*args)` in a compile thread; `on_end` is called on the event loop once it has
        ended (or was withdrawn before it started). ApiError 503 when the pool is full."""
        if self.pending >= self.threads + self.backlog:
            raise ApiError(503, "compile_busy", f"{self.pending} queries are compiling or waiting to (at most "
                           f"{self.threads} threads, setting compile_threads, and {self.backlog} waiting, setting "
                           "compile_queue); retry shortly", headers={"Retry-After": str(COMPILE_RETRY_AFTER)})
        loop = asyncio.get_running_loop()
        self.pending += 1
        future = self._executor.submit(fn, *args)

        def ended() -> None:
            self.pending -= 1
            if on_end is not None:
                on_end()

        def from_thread(_: Future) -> None:
            try:
                loop.call_soon_threadsafe(ended)
            except RuntimeError:  # the loop is closed (server shut down): nothing is left to give back
                pass

        future.add_done_callback(from_thread)
        return future

    def close(self) -> None:
        """Withdraw waiting compilations; running ones end on their own."""
        self._executor.shutdown(wait=False, cancel_futures=True)
