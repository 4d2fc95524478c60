"""Tool agent (Teola Fig. 2b): the LLM plans tool calls (one JSON object per line, splittable so
each call starts as soon as it is written), the tools run, the LLM completes the answer."""

from __future__ import annotations

from typing import Any

from apps._samples import question_sample
from teola import App, Engine, Node
from teola.compile.components import prompts

DEFAULT_TOOLS = ("calculator", "wiki_lookup")


def build(
    llm: dict[str, Any] | None = None,
    tools: dict[str, Any] | None = None,
    tool_names: tuple[str, ...] = DEFAULT_TOOLS,
    max_calls: int = 2,
    plan_instruction: str | None = None,
    plan_examples: str | None = None,
) -> App:
    """`plan_instruction` replaces the planner's instruction (default: prompts.TOOL_PLAN listing
    `tool_names`); `plan_examples` (worked examples, which a small model needs) goes between the
    instruction and the question."""
    app = App("tool_agent")
    if plan_instruction is None:
        plan_instruction = prompts.TOOL_PLAN.format(tools=", ".join(tool_names))
    app.register_engine(Engine("llm", **({"kind": "vllm", "model": "smollm2-135m-instruct"} | (llm or {}))))
    app.register_engine(Engine("tools", kind="tool", **(tools or {})))

    plan = Node(
        "llm",
        name="plan",
        engine="llm",
        anno="splittable",
        config={
            "parts": [
                ["instruction", plan_instruction],
                *([["examples", plan_examples]] if plan_examples else []),
                ["question", "$query.question"],
            ],
            "split": "jsonl",
            "num_items": max_calls,
            "max_tokens": 96,
        },
    )
    call = Node("tool", name="tools", engine="tools", config={"tools": list(tool_names)})
    answer = Node(
        "llm",
        name="answer",
        engine="llm",
        config={
            "parts": [
                ["instruction", prompts.TOOL_ANSWER],
                ["question", "$query.question"],
                ["results", "$results"],
            ],
            "max_tokens": 96,
        },
    )
    plan >> call >> answer
    app.update_template([plan, call, answer])
    app.set_sample(question_sample("What is 17 multiplied by 23?"))
    return app


app = build
