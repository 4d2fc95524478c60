"""Child process of tests/e2e/test_kill_during_ingestion.py: ingests one document of 2,000 chunks
into a kept namespace through the real runtime (sentence-transformers embedder, pgvector store on
TEOLA_PG_DSN), then prints "published".
Usage: python -m tests.support.staged_ingest_child COLLECTION NAMESPACE"""

from __future__ import annotations

import asyncio
import sys

from teola import App, Engine, Node

CHUNKS = 2000
CHUNK_TOKENS = 4
BATCH = 64  # the embedder's batch: the machine-tuned one (8 on 2 cores) takes ~35 s for 2,000 chunks
WORDS = (
    "river",
    "stone",
    "bridge",
    "tower",
    "garden",
    "market",
    "church",
    "harbour",
    "castle",
    "forest",
    "valley",
)


def document() -> str:
    """CHUNKS * CHUNK_TOKENS words: exactly CHUNKS chunks of CHUNK_TOKENS tokens."""
    return " ".join(WORDS[i % len(WORDS)] for i in range(CHUNKS * CHUNK_TOKENS))


def build(collection: str) -> App:
    app = App("staged_ingest")
    app.register_engine(
        Engine(
            "embedding",
            kind="sentence_transformers",
            model="all-minilm-l6-v2",
            max_batch=BATCH,
            max_efficient_batch=BATCH,
        )
    )
    app.register_engine(Engine("vectordb", kind="pgvector", collection=collection))
    index = Node(
        "indexing",
        engine="embedding",
        anno="batchable",
        config={"chunk_size": CHUNK_TOKENS, "chunk_overlap": 0},
    )
    ingest = Node("ingestion", engine="vectordb", anno="batchable")
    index >> ingest
    app.update_template([index, ingest])
    return app


async def main(collection: str, namespace: str) -> None:
    app = build(collection)
    try:
        await app.run({"documents": [document()]}, {"namespace": namespace})
        print("published", flush=True)
    finally:
        await app.stop()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
