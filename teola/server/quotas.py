"""Per-tenant limits on running work: concurrent queries (and OpenAI-door calls), and LLM tokens per
minute. Over a limit the request gets 429 with ``Retry-After`` in the JSON error shape.

Tokens are counted from what the engines report (prompt + output tokens of every LLM call of the
query, or the call's usage), charged when the query ends however it ends (answer, error, 504,
cancel, a stream closed early), in fixed one-minute windows (the `limits` library). LLM work cut
short loses the engine's count with its abort, so it is charged an estimate (`cut_short_tokens`):
its prompt at about 4 bytes a token, plus the text it streamed, or its max_tokens when nothing
streamed. A tenant is admitted while its window has tokens left, so one query may take it
past the limit; the next is refused until the window resets. Stored documents and namespaces have
their own caps (teola.server.store.documents)."""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable, Iterable
from typing import Any

from limits import RateLimitItemPerMinute
from limits.storage import MemoryStorage
from limits.strategies import FixedWindowRateLimiter

from teola.ir.ops import DECODE_OPS, LLM_OPS
from teola.server.errors import ApiError, error_response

TOKEN_KEYS = ("num_prompt_tokens", "num_output_tokens")
LLM_OP_VALUES = frozenset(op.value for op in LLM_OPS)
DECODE_OP_VALUES = frozenset(op.value for op in DECODE_OPS)


class Slot:
    """One admitted query or call of a tenant: `charge` its tokens, `release` it when it ends
    (idempotent: every path that may end the request calls it). Work that outlives its request
    (a compilation in a thread that cannot be stopped) `hold`s the slot until it really ends."""

    __slots__ = ("quotas", "tenant", "released", "ended", "holds")

    def __init__(self, quotas: TenantQuotas, tenant: str) -> None:
        self.quotas = quotas
        self.tenant = tenant
        self.released = False  # given back to the tenant's count
        self.ended = False  # the request is over
        self.holds = 0

    def charge(self, tokens: int) -> None:
        if tokens > 0 and self.quotas.tokens_per_minute:
            self.quotas.limiter.hit(self.quotas.token_item, self.tenant, cost=int(tokens))

    def hold(self) -> Callable[[], None]:
        """Keep the slot taken, even after `release`, until the returned function is called."""
        self.holds += 1
        let_go = False

        def done() -> None:
            nonlocal let_go
            if not let_go:
                let_go = True
                self.holds -= 1
                self._give_back()

        return done

    def release(self) -> None:
        self.ended = True
        self._give_back()

    def _give_back(self) -> None:
        if self.ended and not self.holds and not self.released:
            self.released = True
            self.quotas.running[self.tenant] -= 1
            if not self.quotas.running[self.tenant]:
                del self.quotas.running[self.tenant]


class TenantQuotas:
    """The limits of every tenant. `max_queries`: queries and door calls a tenant may have running
    at once (0: no limit); `tokens_per_minute`: LLM tokens a tenant may use per minute (0: no limit)."""

    def __init__(self, max_queries: int = 0, tokens_per_minute: int = 0) -> None:
        self.max_queries = max_queries
        self.tokens_per_minute = tokens_per_minute
        self.running: dict[str, int] = {}
        self.limiter = FixedWindowRateLimiter(MemoryStorage())
        self.token_item = RateLimitItemPerMinute(max(1, tokens_per_minute))

    def admit(self, tenant: str) -> Slot:
        """A slot for one more query of `tenant`, or ApiError 429 naming the limit it is over."""
        if self.max_queries and self.running.get(tenant, 0) >= self.max_queries:
            raise ApiError(
                429,
                "too_many_queries",
                f"tenant {tenant!r} already has {self.max_queries} queries "
                "running, its limit (setting tenant_max_queries, env TEOLA_TENANT_MAX_QUERIES); "
                "retry when one has answered",
                headers={"Retry-After": "1"},
            )
        if self.tokens_per_minute and not self.limiter.test(self.token_item, tenant):
            reset = self.limiter.get_window_stats(self.token_item, tenant).reset_time
            wait = max(1, math.ceil(reset - time.time()))
            raise ApiError(
                429,
                "token_rate_exceeded",
                f"tenant {tenant!r} used its {self.tokens_per_minute} LLM "
                "tokens of this minute (setting tenant_tokens_per_minute, env "
                f"TEOLA_TENANT_TOKENS_PER_MINUTE); retry in {wait}s",
                headers={"Retry-After": str(wait)},
            )
        self.running[tenant] = self.running.get(tenant, 0) + 1
        return Slot(self, tenant)


def trace_tokens(trace: Iterable[dict[str, Any] | None]) -> int:
    """Prompt + output tokens of the LLM calls recorded in a query's trace."""
    return sum(int(row.get(k) or 0) for row in trace if row for k in TOKEN_KEYS)


def estimate_tokens(text: str) -> int:
    """About how many tokens `text` is (4 bytes of UTF-8 a token), for work whose count was lost."""
    return -(-len(text.encode("utf-8", "replace")) // 4)


def spent_tokens(trace: Iterable[dict[str, Any] | None], compiled: Any) -> int:
    """The tokens a query spent, from its trace (what the engines reported) plus `cut_short_tokens`."""
    rows = [row for row in trace if row]
    return trace_tokens(rows) + cut_short_tokens(rows, compiled)


def cut_short_tokens(trace: list[dict[str, Any]], compiled: Any) -> int:
    """The estimated tokens of a query's LLM work that started on an engine but ended without a
    count (its query failed, timed out or was cancelled meanwhile): each such decode at its
    max_tokens, and the query's input text once, as the prompt they read."""
    prims = {p.name: p for p in compiled.egraph.primitives}
    cut = [
        row
        for row in trace
        if row.get("op") in LLM_OP_VALUES
        and row.get("started") is not None
        and not any(row.get(k) is not None for k in TOKEN_KEYS)
    ]
    if not cut:
        return 0
    decoded = sum(
        int(prims[row["primitive"]].args.get("max_tokens") or 0)
        for row in cut
        if row.get("op") in DECODE_OP_VALUES and row["primitive"] in prims
    )
    return decoded + estimate_tokens(_input_text(compiled.inputs))


def _input_text(inputs: dict[str, Any]) -> str:
    parts: list[str] = []
    for value in inputs.values():
        items = value if isinstance(value, (list, tuple)) else [value]
        parts.extend(item for item in items if isinstance(item, str))
    return "\n".join(parts)


def call_tokens(result: Any) -> int:
    """Prompt + output tokens of one LLM call's result."""
    return sum(int(result.get(k) or 0) for k in TOKEN_KEYS) if isinstance(result, dict) else 0


def parse_shares(text: str | None) -> dict[str, float]:
    """``"gold:3,free:1"`` -> {"gold": 3.0, "free": 1.0}; ValueError naming the malformed part."""
    shares: dict[str, float] = {}
    for part in (p.strip() for p in (text or "").split(",")):
        if not part:
            continue
        tenant, sep, weight = part.partition(":")
        try:
            value = float(weight) if sep else math.nan
        except ValueError:
            value = math.nan
        if not tenant.strip() or not value > 0 or math.isinf(value):
            raise ValueError(
                f"tenant_shares (TEOLA_TENANT_SHARES): {part!r} is not 'tenant:weight' with a weight > 0"
            )
        shares[tenant.strip()] = value
    return shares


# uploads too: each one waits for its tenant's turn at the document store (teola.server.store.postgres)
ADMITTED_PATHS = re.compile(r"^/v1/(apps/[^/]+/(query|documents)|chat/completions|completions|embeddings)$")


class AdmissionMiddleware:
    """Admits each query and OpenAI-door call of a tenant before its body is read, so a tenant over
    its limits costs the server one header lookup per refused request, not a parsed and validated
    body; the slot (``request.state.slot``) comes back when the response has been sent, whatever
    way it ended (answer, error, stream, disconnect). A query for an app not served is a 404 before
    any accounting (no /metrics series per made-up name). Requests without a valid key pass through
    to the key checks (401)."""

    def __init__(self, app: Any, state: Any) -> None:
        self.app = app
        self.state = state

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        path = scope.get("path", "")
        if scope["type"] != "http" or scope.get("method") != "POST" or not ADMITTED_PATHS.match(path):
            await self.app(scope, receive, send)
            return
        tenant = self._tenant(scope)
        if tenant is None:
            await self.app(scope, receive, send)
            return
        app = _app_of(path)
        try:
            if app is not None:
                self.state.app(
                    app
                )  # an unknown app is a 404 before any accounting: /metrics has no label for it
            slot = self.state.quotas.admit(tenant)
        except ApiError as exc:
            if exc.status == 429:
                self.state.metrics.failed.labels(app or DOOR, "limited").inc()
            await error_response(path, exc)(scope, receive, send)
            return
        scope.setdefault("state", {})["slot"] = slot
        try:
            await self.app(scope, receive, send)
        finally:
            slot.release()

    def _tenant(self, scope: dict[str, Any]) -> str | None:
        auth = dict(scope.get("headers") or ()).get(b"authorization", b"").decode("latin-1")
        return self.state.tenants.caller(auth)


DOOR = "openai"  # how /metrics labels door calls refused before their body names a model


def _app_of(path: str) -> str | None:
    """The app a request to an admitted path is for (None: a door call)."""
    parts = path.split("/")
    return parts[3] if len(parts) > 4 and parts[2] == "apps" else None
