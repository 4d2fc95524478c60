"""`Resume`: what one request of a preempted call carries to its next run
(teola.runtime.engine_tier.preemption), and `joined`: its result over all its runs."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from engines.llm_text.split_parser import split_text
from teola.runtime.engine_tier.call_items import CallItems


@dataclass(slots=True, kw_only=True)
class Resume:
    """What one request of a preempted call carries to its next run."""

    request: dict[str, Any]  # the request as first sent
    ids: list[int] = field(default_factory=list)
    text: str = ""
    count: int = 0
    points: list[int] = field(default_factory=list)  # tokens decoded when each preemption hit
    final: Any = None  # its joined result once it ended (then it is not sent again)
    items: CallItems | None = None  # a partial decode's items, carried to its next run


def text_of(result: Any) -> str:
    """The text of an engine result."""
    return str(result.get("text", "")) if isinstance(result, dict) else ""


def joined(resume: Resume, result: Any, complete: bool = False) -> Any:
    """A request's result over all its runs: what it decoded before each preemption, then `result`
    (its last run). `complete`: it decoded all it was asked as the abort hit (not marked aborted)."""
    if not isinstance(result, dict):
        return result
    out = dict(result)
    if complete:
        out.pop("aborted", None)
    if not resume.count:
        return out
    out.update(
        text=resume.text + text_of(result),
        num_output_tokens=len(resume.ids) + int(result.get("num_output_tokens") or 0),
        output_token_ids=resume.ids + list(result.get("output_token_ids") or []),
        preemptions=resume.count,
        resumed_at=list(resume.points),
    )
    split = resume.request.get("split")
    if split:  # items parsed from the whole output, not only from the last run's
        items = split_text(out["text"], split)
        max_items = resume.request.get("max_items")
        out["items"] = items if max_items is None else items[:max_items]
    return out
