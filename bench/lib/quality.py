"""Answer quality and retrieval recall for workloads with gold answers and gold passages.

- `contains`: a gold answer, normalized (lower case, no punctuation or articles, single spaces, as
  SQuAD's evaluation normalizes), appears inside the normalized reply;
- `token_f1`: SQuAD's token-overlap F1 between the reply and its best-matching gold answer (the
  usual free-form measure for NarrativeQA-style answers, which are sentences rather than spans);
- `recall`: the gold passage reached the final context: some context chunk is a piece of it
  (chunks are verbatim substrings of a document in both systems, up to whitespace).
"""

from __future__ import annotations

import math
import re
import string
from collections import Counter
from collections.abc import Iterable
from typing import Any

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_SPACE = re.compile(r"\s+")
_PUNCT = str.maketrans("", "", string.punctuation)


def normalize(text: str) -> str:
    text = _ARTICLES.sub(" ", text.lower().translate(_PUNCT))
    return _SPACE.sub(" ", text).strip()


def contains(reply: str, answers: Iterable[str]) -> bool:
    r = normalize(reply)
    return any(a and a in r for a in (normalize(x) for x in answers))


def token_f1(reply: str, answers: Iterable[str]) -> float:
    pred = normalize(reply).split()
    best = 0.0
    for a in answers:
        gold = normalize(a).split()
        common = sum((Counter(pred) & Counter(gold)).values())
        if common:
            p, r = common / len(pred), common / len(gold)
            best = max(best, 2 * p * r / (p + r))
    return best


def texts(value: Any) -> list[str]:
    """Context chunks from a stored value: a text, a {"text": ...} hit, or nested lists of them."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [str(value.get("text", ""))]
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in texts(v)]
    return []


def recall(context: Iterable[str], gold: str) -> bool:
    g = _SPACE.sub(" ", gold)
    return any(c.strip() and _SPACE.sub(" ", c.strip())[:200] in g for c in context)


def score(reply: str, context: Iterable[str], answers: list[str], gold: str | None) -> dict[str, Any]:
    """contains / f1 of the reply; answer_in_context: a gold answer string is in the final context
    (what synthesis could copy); recall: the gold passage reached it (when `gold` is given)."""
    chunks = list(context)
    out: dict[str, Any] = {
        "contains": contains(reply, answers),
        "f1": token_f1(reply, answers),
        "answer_in_context": contains(" ".join(chunks), answers),
    }
    if gold is not None:
        out["recall"] = recall(chunks, gold)
    return out


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """95% Wilson score interval of a proportion k/n."""
    if n == 0:
        return (0.0, 1.0)
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return (max(0.0, centre - half), min(1.0, centre + half))


def mcnemar(only_a: int, only_b: int) -> float:
    """Exact two-sided McNemar p-value for paired yes/no outcomes: `only_a` items right only for
    system A, `only_b` right only for B (a binomial test of the discordant pairs at 1/2)."""
    n = only_a + only_b
    if n == 0:
        return 1.0
    k = min(only_a, only_b)
    tail = sum(math.comb(n, i) for i in range(k + 1)) / 2**n
    return min(1.0, 2 * tail)


def paired_difference(a: list[bool], b: list[bool], z: float = 1.96) -> dict[str, Any]:
    """A minus B on the same items: discordant counts, the difference of rates with its 95% interval
    (Wald on paired differences) and McNemar's exact p."""
    if len(a) != len(b):
        raise ValueError(f"paired outcomes need equal lengths, got {len(a)} and {len(b)}")
    n = len(a)
    only_a = sum(1 for x, y in zip(a, b) if x and not y)
    only_b = sum(1 for x, y in zip(a, b) if y and not x)
    d = (only_a - only_b) / n if n else 0.0
    var = ((only_a + only_b) / n - d * d) / n if n else 0.0
    half = z * math.sqrt(max(var, 0.0))
    return {
        "n": n,
        "only_a": only_a,
        "only_b": only_b,
        "diff": d,
        "lo": d - half,
        "hi": d + half,
        "p": mcnemar(only_a, only_b),
    }
