"""Reading the server's HTTP answers in tests: server-sent events and Prometheus metric values."""
from __future__ import annotations

import json


def sse(text: str) -> list[tuple[str, dict]]:
    """A text/event-stream body as [(event kind, JSON data), ...]."""
    return [(block.split("\n")[0].removeprefix("event: "), json.loads(block.split("\n")[1].removeprefix("data: ")))
            for block in text.strip().split("\n\n")]


def metric(text: str, key: str) -> float:
    """The value of one sample (`name{labels}`) in a Prometheus exposition; 0 when absent."""
    for line in text.splitlines():
        if line.startswith(key + " "):
            return float(line.split()[-1])
    return 0.0
