"""A caller's W3C trace context (``traceparent`` / ``tracestate`` headers), read with OpenTelemetry's
propagator on both doors (POST /v1/apps/{app}/query and the OpenAI-compatible door), so teola's
spans of the request join the caller's trace. Without the header, or without OpenTelemetry
installed (an optional dependency), requests start traces of their own."""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Coroutine
from typing import Any

from fastapi import Request


def caller_context(request: Request) -> Any:
    """The OpenTelemetry context the request's traceparent names, or None."""
    if "traceparent" not in request.headers:
        return None
    try:
        from opentelemetry.propagate import extract
    except ImportError:
        return None
    return extract(dict(request.headers))


def in_context(parent: Any, work: Coroutine[Any, Any, Any]) -> asyncio.Future:
    """`work` as a task whose current OpenTelemetry context is `parent` (spans it starts are its
    children); a plain task when `parent` is None."""
    if parent is None:
        return asyncio.ensure_future(work)
    from opentelemetry import context as otel_context

    scope = contextvars.copy_context()
    scope.run(otel_context.attach, parent)
    return asyncio.get_running_loop().create_task(work, context=scope)
