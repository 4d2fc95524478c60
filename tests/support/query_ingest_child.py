"""Child process of tests/integration/test_pgvector_query_namespaces.py: one query that ingests its
document into a persistent pgvector collection (TEOLA_PG_DSN) under the namespace generated for
it, while its LLM step hangs until the process is killed, so the query never ends and never drops
that namespace. Usage: python -m tests.support.query_ingest_child COLLECTION"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

from engines.sim.sim_engine import SimEngine
from teola import App, Engine, Node


class Hanging(SimEngine):
    """A sim LLM that never answers."""

    async def execute(self, op: str, requests: list[dict[str, Any]]) -> list[Any]:
        await asyncio.Event().wait()
        return []


def build(collection: str) -> App:
    app = App("query_ingest")
    app.register_engine(
        Engine("embedding", kind="sentence_transformers"), backend=SimEngine("embedding", dim=384)
    )
    app.register_engine(Engine("vectordb", kind="pgvector", collection=collection))
    app.register_engine(Engine("llm", kind="vllm"), backend=Hanging("llm", serial=False))
    index = Node(
        "indexing", engine="embedding", config={"chunk_size": 8, "chunk_overlap": 0, "tokenizer": "words"}
    )
    ingest = Node("ingestion", engine="vectordb")
    answer = Node("llm", name="answer", engine="llm", config={"parts": [["question", "$query.question"]]})
    index >> ingest >> answer
    app.update_template([index, ingest, answer])
    return app


async def main(collection: str) -> None:
    app = build(collection)
    document = " ".join(f"word{i}" for i in range(400))
    await app.run({"question": "What is kept?", "documents": [document]})


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
