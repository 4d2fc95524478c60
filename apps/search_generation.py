"""Search-engine-empowered generation (Teola Fig. 2a): a small LLM drafts an answer and judges
whether a search is needed (Condition); if so, the top-4 search results go to the core LLM."""

from __future__ import annotations

from typing import Any

from apps._samples import question_sample
from teola import App, Engine, Node
from teola.compile.components import prompts


def build(
    llm: dict[str, Any] | None = None,
    judge_llm: dict[str, Any] | None = None,
    search: dict[str, Any] | None = None,
) -> App:
    """`judge_llm` options register a separate small engine for the judge; by default the judge
    shares the core LLM engine."""
    app = App("search_generation")
    app.register_engine(Engine("llm", **({"kind": "vllm", "model": "smollm2-135m-instruct"} | (llm or {}))))
    judge_engine = "llm"
    if judge_llm is not None:
        app.register_engine(Engine("judge_llm", **({"kind": "vllm"} | judge_llm)))
        judge_engine = "judge_llm"
    app.register_engine(Engine("search", kind="search", **(search or {})))

    judge = Node(
        "llm",
        name="judge",
        engine=judge_engine,
        config={"parts": [["instruction", prompts.JUDGE], ["question", "$query.question"]], "max_tokens": 64},
    )
    need_search = Node("condition", name="need_search", config={"not_contains": "SEARCH: NO"})
    web = Node("web_search", engine="search", config={"top_k": 4})
    core = Node(
        "llm",
        name="core",
        engine="llm",
        config={
            "parts": [
                ["instruction", prompts.SEARCH_ANSWER],
                ["question", "$query.question"],
                ["context", "$context"],
            ],
            "max_tokens": 96,
        },
    )
    answer = Node("aggregate", name="answer", config={"mode": "first"})
    judge >> need_search >> web >> core
    [core, judge] >> answer
    app.update_template([judge, need_search, web, core, answer])
    app.set_sample(question_sample("What is the capital of France?"))
    return app


app = build
