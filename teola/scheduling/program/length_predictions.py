"""Predicted output lengths of LLM calls from the Runtime option "length_predictor" (LAMPS §6: the
`lamps` and `sjf` policies rank by them), set by each LLM engine's scheduler when a call is queued."""
from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

log = logging.getLogger("teola.runtime")


def predict_lengths(predict: Callable[[dict[str, Any]], Any] | None, requests: list[dict[str, Any]],
                    engine: str) -> None:
    """Set "predicted_tokens" (what `lamps` and `sjf` rank by) on LLM requests that carry none, from
    the Runtime option "length_predictor": a callable from a request to its predicted output tokens
    before its next pause (None: no prediction). A predictor that fails or answers something other
    than a number >= 1 is logged and the request keeps its max_tokens as the prediction."""
    if predict is None:
        return
    for req in requests:
        if req.get("predicted_tokens") is not None:
            continue
        try:
            value = predict(req)
        except Exception as exc:  # noqa: BLE001 -- a prediction is advice; the call runs without it
            log.warning("engine %s: the length predictor failed: %s: %s", engine, type(exc).__name__, exc)
            continue
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 1:
            log.warning("engine %s: the length predictor answered %r, not tokens >= 1; ignored", engine, value)
            continue
        req["predicted_tokens"] = int(value)
