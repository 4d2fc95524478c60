"""The prompts of the offline apps' LLM stages (one function per stage), shared by the length
recorder (`python -m bench plan_lengths`), the planner's prompt-length estimate and
`teola run-job`."""

from __future__ import annotations

from functools import cache

STAGES = ("answer", "fuse", "route", "summarise", "evaluate")


def answer(question: str) -> str:
    return f"Answer the question in a few sentences.\nQuestion: {question}"


def fuse(question: str, answers: list[str]) -> str:
    shown = "\n".join(f"Answer {i + 1}: {a.strip()}" for i, a in enumerate(answers))
    return (
        f"Several assistants answered the question below. Combine their answers into one best answer.\n"
        f"Question: {question}\n{shown}\nBest answer:"
    )


def summarise(chunk: str, summary: str | None) -> str:
    if not summary:
        return f"Summarise this passage in a few sentences.\nPassage: {chunk}"
    return (
        f"Here is the summary of a document so far, and its next passage. Write the updated summary.\n"
        f"Summary so far: {summary.strip()}\nNext passage: {chunk}"
    )


def evaluate(summary: str, aspect: int) -> str:
    aspects = ("accuracy", "coherence", "coverage", "concision")
    return (
        f"Rate the {aspects[aspect % len(aspects)]} of this summary from 1 to 10 and give one reason.\n"
        f"Summary: {summary.strip()}"
    )


def build(stage: str, inputs: dict, upstream: list[str]) -> str:
    """The prompt of one request: its dataset inputs plus the outputs it depends on."""
    if stage in ("answer", "route"):
        return answer(inputs["question"])
    if stage == "fuse":
        return fuse(inputs["question"], upstream)
    if stage == "summarise":
        return summarise(inputs["chunk"], upstream[0] if upstream else None)
    if stage == "evaluate":
        return evaluate(upstream[0] if upstream else "", int(inputs.get("aspect", 0)))
    raise ValueError(f"unknown app stage {stage!r}; stages: {', '.join(STAGES)}")


@cache
def shared_prefix(stage: str, upstream: int) -> str:
    """The leading text every prompt of `stage` with `upstream` upstream outputs starts with."""
    a = build(stage, {"question": "\x00", "chunk": "\x00", "aspect": 0}, ["\x00"] * upstream)
    b = build(stage, {"question": "\x01", "chunk": "\x01", "aspect": 1}, ["\x01"] * upstream)
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return a[:n]
