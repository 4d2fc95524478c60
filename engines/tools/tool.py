"""A registered tool of the tool engine (engines.tools.tool_engine) and the errors its calls raise."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


class ToolError(RuntimeError):
    """One tool call failed; `.tool` and `.index` (position in the batch) say which."""

    def __init__(self, message: str, tool: str, index: int) -> None:
        super().__init__(message)
        self.tool = tool
        self.index = index


class ToolHTTPError(RuntimeError):
    """An HTTP tool call failed; its message is safe to show the tenant (no URL, no response body)."""


class ToolBatchError(RuntimeError):
    """Some requests of a batch failed; `.failures` holds one `ToolError` per failed request."""

    def __init__(self, failures: list[ToolError], batch_size: int) -> None:
        lines = "; ".join(f"request {f.index} ({f.tool}): {f}" for f in failures)
        super().__init__(f"{len(failures)} of {batch_size} tool calls failed: {lines}")
        self.failures = failures


@dataclass(slots=True)
class Tool:
    """A registered tool: a Python callable or an HTTP endpoint."""

    name: str
    description: str = ""
    fn: Callable[..., Any] | None = None
    url: str | None = None
    method: str = "GET"
    headers: dict[str, str] = field(default_factory=dict)
    timeout: float | None = None
    idempotent: bool = False


def check_timeout(name: str, timeout: Any) -> float | None:
    """A tool's own timeout in seconds (None: the engine's), or a ValueError naming the tool."""
    if timeout is None:
        return None
    if not (isinstance(timeout, (int, float)) and timeout > 0):
        raise ValueError(f"tool {name!r}: timeout={timeout!r} must be a positive number of seconds")
    return float(timeout)
