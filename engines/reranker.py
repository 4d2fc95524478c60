"""The reranking engine: scores (query, text) pairs, higher = more relevant.

With `model=<path>` it runs that sentence-transformers `CrossEncoder` (what production deployments use,
e.g. a local copy of cross-encoder/ms-marco-MiniLM-L-6-v2). No pip package ships cross-encoder weights,
so the offline default is documented as what it is: the cosine similarity of MiniLM bi-encoder embeddings
of the query and the text. That is a real relevance signal (the same model retrieval uses), not a trained
reranker; `self.mode` says which one is running ("cross_encoder" or "bi_encoder_cosine").
"""
from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from engines.models import MINILM, resolve_model
from engines.paths import configure_engine_env
from engines.protocol import EngineProfile


class RerankerEngine:
    """Options: model (a CrossEncoder folder; omitted = the MiniLM cosine default), bi_encoder
    (the embedding model for the default; "all-minilm-l6-v2"), device (None = library choice),
    max_batch (256), max_efficient_batch (64)."""

    ops = frozenset({"reranking"})

    def __init__(self, name: str, model: str | None = None, bi_encoder: str = MINILM,
                 device: str | None = None, max_batch: int = 256, max_efficient_batch: int = 64):
        for field, value in (("max_batch", max_batch), ("max_efficient_batch", max_efficient_batch)):
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"engine {name!r}: option {field} must be a positive int, got {value!r}")
        if model is not None and not isinstance(model, str):
            raise ValueError(f"engine {name!r}: option model must be the path of a sentence-transformers "
                             f"CrossEncoder folder, or omitted for the offline MiniLM cosine scorer")
        self.name = name
        self.model_name = model
        self.bi_encoder_name = bi_encoder
        self.device = device
        self.mode = "cross_encoder" if model is not None else "bi_encoder_cosine"
        self.profile = EngineProfile(max_batch=max_batch, max_efficient_batch=min(max_efficient_batch, max_batch))
        self.calls: list[int] = []
        self._model = None

    async def start(self) -> None:
        if self._model is None:
            self._model = await asyncio.to_thread(self._load)

    def _load(self):
        configure_engine_env()
        if self.mode == "cross_encoder":
            from sentence_transformers import CrossEncoder

            return CrossEncoder(str(resolve_model(self.model_name)), device=self.device)
        from sentence_transformers import SentenceTransformer

        return SentenceTransformer(str(resolve_model(self.bi_encoder_name, prepare=True)), device=self.device)

    def score(self, pairs: list[tuple[str, str]]) -> list[float]:
        """Relevance of each (query, text) pair (blocking; one model call per batch)."""
        if self._model is None:
            raise RuntimeError(f"engine {self.name!r} is not started; await engine.start() first")
        if not pairs:
            return []
        self.calls.append(len(pairs))
        if self.mode == "cross_encoder":
            scores = self._model.predict(pairs, batch_size=len(pairs), show_progress_bar=False,
                                         convert_to_numpy=True)
            return [float(s) for s in scores]
        queries = sorted({q for q, _ in pairs})
        texts = [t for _, t in pairs]
        vectors = self._model.encode(queries + texts, batch_size=len(queries) + len(texts),
                                     normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False)
        row = {q: i for i, q in enumerate(queries)}
        offset = len(queries)
        return [float(vectors[row[q]] @ vectors[offset + i]) for i, (q, _) in enumerate(pairs)]

    async def execute(self, op: str, requests: list[dict[str, Any]]) -> list[Any]:
        """One float per {"query": str, "text": str} request, in order."""
        if op not in self.ops:
            raise ValueError(f"engine {self.name!r} (reranker) runs only 'reranking', not {op!r}")
        pairs = []
        for i, req in enumerate(requests):
            if not (isinstance(req, dict) and isinstance(req.get("query"), str) and isinstance(req.get("text"), str)):
                raise ValueError(f"reranking request {i} must be {{'query': str, 'text': str}}, got {req!r:.80}")
            pairs.append((req["query"], req["text"]))
        return await asyncio.to_thread(self.score, pairs)

    async def stream(self, op: str, requests: list[dict[str, Any]]) -> AsyncIterator[tuple[int, str, Any]]:
        """No partial outputs: yields (i, "final", score) per request after the batch."""
        for i, result in enumerate(await self.execute(op, requests)):
            yield i, "final", result

    async def health(self) -> bool:
        return self._model is not None

    async def stop(self) -> None:
        self._model = None
