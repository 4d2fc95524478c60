"""Retrying an idempotent HTTP call that a service answered 429 or 5xx (tenacity), for the remote
engines that call HTTP APIs (engines.search.remote_search, engines.tools.tool_engine).

A call answered 429, 500, 502, 503 or 504 is sent again up to `retries` times. Each wait is the
response's `Retry-After` (seconds or an HTTP date) when it has one, else an exponential backoff
with jitter from `BACKOFF_S` (at most `MAX_BACKOFF_S`). No retry starts whose wait would end more
than `max_retry_wait` seconds after the first attempt was sent: a longer `Retry-After` ends the
retries, and the last answer is returned as it is (the caller reports its status). Exceptions
(timeouts, refused connections) are not retried here. Callers retry only idempotent requests: a
POST that is not known to be idempotent may have taken effect before the error.
"""

from __future__ import annotations

import email.utils
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from tenacity import AsyncRetrying, RetryCallState, retry_if_result, stop_after_attempt, stop_before_delay
from tenacity.wait import wait_exponential_jitter

log = logging.getLogger("teola.engines")

RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
DEFAULT_RETRIES = 2
DEFAULT_MAX_RETRY_WAIT = 5.0
BACKOFF_S = 0.2
MAX_BACKOFF_S = 2.0

T = TypeVar("T")


def retry_after_seconds(value: str | None, now: float | None = None) -> float | None:
    """Seconds a `Retry-After` header value asks to wait (delta-seconds or an HTTP date; a date in
    the past is 0); None when absent or unreadable."""
    if value is None:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:  # an HTTP date is GMT
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How many times (`retries`, after the first attempt) and for how long (`max_retry_wait`
    seconds from the first attempt) a 429/5xx answer is retried; `retries=0` turns retries off."""

    retries: int = DEFAULT_RETRIES
    max_retry_wait: float = DEFAULT_MAX_RETRY_WAIT

    @classmethod
    def from_options(cls, engine: str, retries: Any, max_retry_wait: Any) -> RetryPolicy:
        """The policy of engine `engine`'s options, ValueError naming the option when invalid."""
        if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
            raise ValueError(
                f"engine {engine!r}: option retries={retries!r} must be an int >= 0 "
                f"(0 turns retries of 429/5xx answers off)"
            )
        if (
            isinstance(max_retry_wait, bool)
            or not isinstance(max_retry_wait, (int, float))
            or max_retry_wait < 0
        ):
            raise ValueError(
                f"engine {engine!r}: option max_retry_wait={max_retry_wait!r} must be a number of "
                f"seconds >= 0"
            )
        return cls(retries, float(max_retry_wait))

    async def call(
        self,
        send: Callable[[], Awaitable[T]],
        status: Callable[[T], int],
        retry_after: Callable[[T], str | None],
        where: str,
    ) -> T:
        """`await send()`, again while its answer's `status` is retryable and the policy allows;
        the last answer. `where` names the call in the log (no query string: it may hold a key)."""
        if self.retries == 0:
            return await send()

        def wait(state: RetryCallState) -> float:
            asked = retry_after_seconds(retry_after(state.outcome.result()))  # type: ignore[union-attr]
            return asked if asked is not None else backoff(state)

        def note(state: RetryCallState) -> None:
            answer = state.outcome.result()  # type: ignore[union-attr]
            log.warning(
                "%s: HTTP %d; retry %d of %d in %.2f s",
                where,
                status(answer),
                state.attempt_number,
                self.retries,
                state.upcoming_sleep,
            )

        backoff = wait_exponential_jitter(multiplier=BACKOFF_S, max=MAX_BACKOFF_S, jitter=BACKOFF_S)
        retrying = AsyncRetrying(
            stop=stop_after_attempt(self.retries + 1) | stop_before_delay(self.max_retry_wait),
            wait=wait,
            retry=retry_if_result(lambda answer: status(answer) in RETRY_STATUSES),
            before_sleep=note,
            retry_error_callback=lambda state: state.outcome.result(),  # type: ignore[union-attr]
            reraise=True,
        )

        async def attempt() -> T:  # a coroutine function: tenacity calls a plain callable synchronously
            return await send()

        return await retrying(attempt)
