"""ReAct-style agent (LAMPS §2): one LLM call reasons, writes a tool call, pauses while the tool
runs, and continues with the result in the same context, up to `max_rounds` tool calls (component
"agent": teola.compile.components.agent). Tools: the calculator and a Wikipedia lookup over the shipped
corpus in PostgreSQL full-text search, on the local tool engine."""

from __future__ import annotations

from typing import Any

from apps._samples import question_sample
from teola import App, Engine, Node

DEFAULT_TOOLS = ("calculator", "wikipedia")
# Worked calls: a 135M model copies the syntax from an example far more often than from a rule.
EXAMPLES = (
    'Example. Question: What is 12 times 4?\nAnswer: <tool>{"name": "calculator", "arguments": '
    '{"expression": "12*4"}}</tool>\n<result>48</result>\n12 times 4 is 48.\n\n'
    'Example. Question: Where is the Eiffel Tower?\nAnswer: <tool>{"name": "wikipedia", "arguments": '
    '{"query": "Eiffel Tower"}}</tool>\n<result>[{"title": "Eiffel Tower", "text": "The Eiffel Tower is a '
    'lattice tower in Paris, France."}]</result>\nThe Eiffel Tower is in Paris, France.'
)


# The answer begins with a tool call: SmolLM2-135M answers from memory (17 x 23 = 341) and never
# writes the syntax itself, even after the examples (measured on 4 questions and 3 instructions).
FIRST_CALL = '<tool>{"name": "'


def build(
    llm: dict[str, Any] | None = None,
    tools: dict[str, Any] | None = None,
    tool_names: tuple[str, ...] = DEFAULT_TOOLS,
    max_rounds: int = 3,
    handling: str = "discard",
    examples: str | None = EXAMPLES,
    start: str | None = FIRST_CALL,
) -> App:
    """`tools`: options of the tool engine (default: the built-in tools and the Wikipedia lookup);
    `handling`: what the LLM engine does with the call's KV while a tool runs (discard, preserve,
    swap); `examples`: worked calls after the instruction (None: none); `start`: what the model's
    answer begins with (default: an open tool call, so the first step is an action; None: nothing,
    for a model that follows the instruction)."""
    app = App("react_agent")
    app.register_engine(Engine("llm", **({"kind": "vllm", "model": "smollm2-135m-instruct"} | (llm or {}))))
    app.register_engine(Engine("tools", kind="tool", **({"wikipedia": True} | (tools or {}))))
    agent = Node(
        "agent",
        name="agent",
        engine="llm",
        config={
            "tool_engine": "tools",
            "tools": list(tool_names),
            "max_rounds": max_rounds,
            "handling": handling,
            **({"examples": examples} if examples else {}),
            **({"start": start} if start else {}),
            "max_tokens": 96,
        },
    )
    app.update_template([agent])
    app.set_sample(question_sample("What is 17 multiplied by 23?"))
    return app


app = build
