"""Predicted output lengths of LLM calls from the Runtime option "length_predictor" (LAMPS §6: the
`lamps` and `sjf` policies rank by them). Each LLM engine's scheduler asks for them when a call is
queued and keeps them in the requests' dispatch records (`DispatchRecord.predicted_tokens`)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

log = logging.getLogger("teola.runtime")


def predicted_lengths(
    predict: Callable[[Mapping[str, Any]], Any] | None, requests: Sequence[Mapping[str, Any]], engine: str
) -> list[int | None]:
    """The predicted output tokens of each request (None: no prediction) from the Runtime option
    "length_predictor": a callable from a request to its predicted output tokens before its next
    pause. A request that carries "predicted_tokens" already (its submitter's hint, in the request
    as the engine receives it) is not asked about. A predictor that fails or answers something other
    than a number >= 1 is logged and the request keeps its max_tokens as the prediction."""
    out: list[int | None] = []
    for req in requests:
        out.append(
            None if predict is None or req.get("predicted_tokens") is not None else _one(predict, req, engine)
        )
    return out


def _one(predict: Callable[[Mapping[str, Any]], Any], req: Mapping[str, Any], engine: str) -> int | None:
    try:
        value = predict(req)
    except Exception as exc:  # noqa: BLE001 -- a prediction is advice; the call runs without it
        log.warning("engine %s: the length predictor failed: %s: %s", engine, type(exc).__name__, exc)
        return None
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 1:
        log.warning("engine %s: the length predictor answered %r, not tokens >= 1; ignored", engine, value)
        return None
    return int(value)
