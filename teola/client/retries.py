"""When the client tries a request again, and how long it waits first: a pure decision, so the
sync and the async client share it and only sleep differently.

Retried, at most ``attempts`` tries in all:
- 429 and 503 answers, after the server's ``Retry-After`` (seconds or an HTTP date), or after an
  exponential backoff when it gave none. A wait longer than ``max_wait`` is not waited: the error
  is raised at once, its ``retry_after`` telling the caller when to come back. ``quota_exceeded``
  is never retried: stored documents or namespaces over a cap stay over it until some are deleted.
- connection failures before the request was sent (connect errors and timeouts, a full pool),
  for every request;
- other transport failures (a connection reset, a read timeout) only for idempotent requests:
  reads, deletes and uploads (an upload of the same text stores it once), never a query.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import httpx

from teola.client.errors import connection_error, error_from_response, retry_after

log = logging.getLogger("teola.client")

RETRIED_STATUSES = frozenset({429, 503})
NEVER_RETRIED_CODES = frozenset({"quota_exceeded"})
NOT_SENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)


@dataclass(frozen=True, slots=True)
class Retries:
    """The retry policy of a client. `attempts`: tries in all (1: never retry); `max_wait`: the
    longest wait in seconds the client sleeps before a retry; `backoff`: the first wait when the
    server gave no ``Retry-After``, doubled on each later try."""

    attempts: int = 3
    max_wait: float = 30.0
    backoff: float = 0.5

    def __post_init__(self) -> None:
        if not isinstance(self.attempts, int) or self.attempts < 1:
            raise ValueError(f"Retries.attempts must be an int >= 1 (1 never retries), got {self.attempts!r}")
        if self.max_wait < 0 or self.backoff < 0:
            raise ValueError(
                f"Retries.max_wait and backoff must be >= 0, got {self.max_wait!r}, {self.backoff!r}"
            )

    def after_answer(self, attempt: int, response: httpx.Response, code: str) -> float | None:
        """Seconds to wait before trying again after try number `attempt` (from 1) answered the
        error `response` with the server's error `code`; None: do not retry (raise it)."""
        if (
            attempt >= self.attempts
            or response.status_code not in RETRIED_STATUSES
            or code in NEVER_RETRIED_CODES
        ):
            return None
        asked = retry_after(response.headers)
        wait = asked if asked is not None else self._backoff(attempt)
        return wait if wait <= self.max_wait else None

    def after_failure(self, attempt: int, exc: httpx.TransportError, idempotent: bool) -> float | None:
        """Seconds to wait before trying again after try number `attempt` failed with `exc`
        (no answer); None: do not retry (raise it)."""
        if attempt >= self.attempts or not (idempotent or isinstance(exc, NOT_SENT)):
            return None
        return min(self._backoff(attempt), self.max_wait)

    def _backoff(self, attempt: int) -> float:
        return self.backoff * 2 ** (attempt - 1)


NO_RETRIES = Retries(attempts=1)


def wait_or_raise(
    retries: Retries,
    attempt: int,
    idempotent: bool,
    *,
    answer: httpx.Response | None = None,
    failure: httpx.TransportError | None = None,
) -> float:
    """Seconds to wait before the next try after try `attempt` got the error `answer` (its body read)
    or the transport `failure`; raises the client's exception for it when it is not retried."""
    if answer is not None:
        error = error_from_response(answer)
        wait = retries.after_answer(attempt, answer, error.code)
        if wait is None:
            raise error
        log.info(
            "%s %s answered %s %s; try %d of %d in %.2fs",
            answer.request.method,
            answer.request.url.path,
            answer.status_code,
            error.code,
            attempt + 1,
            retries.attempts,
            wait,
        )
        return wait
    assert failure is not None, "wait_or_raise needs an answer or a failure"
    wait = retries.after_failure(attempt, failure, idempotent)
    if wait is None:
        raise connection_error(failure) from failure
    log.info(
        "%s: %s; try %d of %d in %.2fs",
        failure.request.url if _has_request(failure) else "request",
        type(failure).__name__,
        attempt + 1,
        retries.attempts,
        wait,
    )
    return wait


def _has_request(exc: httpx.TransportError) -> bool:
    try:
        exc.request  # noqa: B018  (the property raises when the error has no request)
    except RuntimeError:  # httpx raises when the error was made without a request
        return False
    return True
