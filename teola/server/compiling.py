"""`CompilePool`: the threads that compile queries for the server (teola.server.queries.compile_query).

Compilation is CPU work in a thread so the event loop keeps serving. It runs in a pool of its own,
not the loop's default executor that synchronous tools and the document store share, so a flood of
slow compilations cannot starve them. A thread cannot be stopped: a compilation whose query already
got its 504 runs on, so the pool counts it (and the tenant's slot stays taken) until its thread
really ends, and a pool with `threads` running and `backlog` waiting refuses more with 503.

Tenants share the threads fairly: waiting compilations start round-robin by tenant, and one tenant
runs at most ``threads - 1`` at once (with 2 threads or more), so a thread is always left for the
others: a tenant flooding the server with slow compilations cannot make every other tenant's
queries time out while compiling. (Compilation holds the GIL, so one tenant loses little by it.)"""

from __future__ import annotations

import asyncio
from collections import OrderedDict, deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from teola.server.errors import ApiError

COMPILE_RETRY_AFTER = 1  # seconds a client refused for a full pool waits


class CompileJob:
    """One compilation: `future` (on the event loop) gets its result or exception."""

    __slots__ = ("tenant", "fn", "args", "on_end", "future", "started")

    def __init__(
        self,
        tenant: str,
        fn: Callable[..., Any],
        args: tuple,
        on_end: Callable[[], None] | None,
        future: asyncio.Future,
    ) -> None:
        self.tenant, self.fn, self.args, self.on_end, self.future = tenant, fn, args, on_end, future
        self.started = False


class CompilePool:
    """At most `threads` compilations at once and `backlog` waiting for a thread, shared fairly by
    tenants. Every method runs on the event loop; only `fn` runs in a thread."""

    def __init__(self, threads: int, backlog: int) -> None:
        self.threads = threads
        self.backlog = backlog
        self.pending = 0  # submitted and not ended (running or waiting)
        self.running: dict[str, int] = {}
        self._waiting: OrderedDict[str, deque[CompileJob]] = OrderedDict()  # round-robin order of tenants
        self._executor = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="teola-compile")

    def submit(
        self, tenant: str, fn: Callable[..., Any], *args: Any, on_end: Callable[[], None] | None = None
    ) -> CompileJob:
        """Compile `fn(*args)` for `tenant` in a compile thread; `on_end` is called once the thread
        has ended (or the job was withdrawn before it started). ApiError 503 when the pool is full."""
        if self.pending >= self.threads + self.backlog:
            raise ApiError(
                503,
                "compile_busy",
                f"{self.pending} queries are compiling or waiting to (at most "
                f"{self.threads} threads, setting compile_threads, and {self.backlog} waiting, setting "
                "compile_queue); retry shortly",
                headers={"Retry-After": str(COMPILE_RETRY_AFTER)},
            )
        job = CompileJob(tenant, fn, args, on_end, asyncio.get_running_loop().create_future())
        self.pending += 1
        self._waiting.setdefault(tenant, deque()).append(job)
        self._start_next()
        return job

    def withdraw(self, job: CompileJob) -> None:
        """Drop `job` if it has not started (a running one ends on its own)."""
        queue = self._waiting.get(job.tenant)
        if job.started or queue is None or job not in queue:
            return
        queue.remove(job)
        if not queue:
            del self._waiting[job.tenant]
        job.future.cancel()
        self._ended(job)

    def close(self) -> None:
        """Withdraw waiting compilations; running ones end on their own."""
        for queue in list(self._waiting.values()):
            for job in list(queue):
                self.withdraw(job)
        self._executor.shutdown(wait=False, cancel_futures=True)

    @property
    def per_tenant(self) -> int:
        """How many compilations one tenant may run at once."""
        return max(1, self.threads - 1)

    def _start_next(self) -> None:
        while sum(self.running.values()) < self.threads:
            tenant = next((t for t in self._waiting if self.running.get(t, 0) < self.per_tenant), None)
            if tenant is None:
                return
            queue = self._waiting.pop(tenant)
            job = queue.popleft()
            if queue:
                self._waiting[tenant] = queue  # to the back of the round
            self._run(job)

    def _run(self, job: CompileJob) -> None:
        job.started = True
        self.running[job.tenant] = self.running.get(job.tenant, 0) + 1
        loop = job.future.get_loop()
        thread = self._executor.submit(job.fn, *job.args)

        def finished(_: Any) -> None:
            self.running[job.tenant] -= 1
            if not self.running[job.tenant]:
                del self.running[job.tenant]
            if thread.cancelled():  # the executor shut down before it started
                job.future.cancel()
            elif not job.future.done():
                if thread.exception() is not None:
                    job.future.set_exception(thread.exception())
                else:
                    job.future.set_result(thread.result())
            self._ended(job)
            self._start_next()

        def from_thread(_: Any) -> None:
            try:
                loop.call_soon_threadsafe(finished, None)
            except RuntimeError:  # the loop is closed (server shut down): nothing is left to give back
                pass

        thread.add_done_callback(from_thread)

    def _ended(self, job: CompileJob) -> None:
        self.pending -= 1
        if job.on_end is not None:
            job.on_end()
