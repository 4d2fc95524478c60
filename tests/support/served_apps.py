"""Apps for tests that run `teola serve` in another process (``tests.support.served_apps:echo``):
deterministic sim engines, so a server starts in seconds and needs no model."""

from __future__ import annotations

from engines.sim.sim_engine import SimEngine
from teola import App, Engine, Node


def echo() -> App:
    """One LLM component answering the question on a sim engine."""
    app = App("echo")
    app.register_engine(Engine("llm", kind="vllm"), backend=SimEngine("llm"))
    app.update_template(
        [
            Node(
                "llm",
                name="answer",
                engine="llm",
                config={
                    "parts": [["instruction", "Answer briefly."], ["question", "$query.question"]],
                    "max_tokens": 8,
                },
            )
        ]
    )
    return app
