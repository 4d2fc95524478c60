"""The embedding engine: a sentence-transformers bi-encoder behind the teola engine protocol.

A batch of n requests is one `encode` call with batch_size=n (one forward pass of the model), run in a
worker thread so the event loop keeps serving other engines while the model computes.
"""
from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from typing import Any

from engines.models import resolve_model
from engines.paths import configure_engine_env
from engines.protocol import EngineProfile


class EmbeddingEngine:
    """Options: model (short name or sentence-transformers folder; default "all-minilm-l6-v2"),
    device (None = sentence-transformers' choice: cuda if available, else cpu), max_batch (256),
    max_efficient_batch (64).

    `calls` lists the batch size of every `execute` (one encode call each); `forward_batches` lists the
    batch size of every forward pass of the model, so a test can check that a batch is one model call.
    """

    ops = frozenset({"embedding"})

    def __init__(self, name: str, model: str = "all-minilm-l6-v2", device: str | None = None,
                 max_batch: int = 256, max_efficient_batch: int = 64):
        for field, value in (("max_batch", max_batch), ("max_efficient_batch", max_efficient_batch)):
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"engine {name!r}: option {field} must be a positive int, got {value!r}")
        if device is not None and not isinstance(device, str):
            raise ValueError(f"engine {name!r}: option device must be a torch device string like 'cpu' or "
                             f"'cuda:0', or omitted, got {device!r}")
        self.name = name
        self.model_name = model
        self.device = device
        self.profile = EngineProfile(max_batch=max_batch, max_efficient_batch=min(max_efficient_batch, max_batch))
        self.calls: list[int] = []
        self.forward_batches: list[int] = []
        self.dimension: int | None = None
        self._model = None

    async def start(self) -> None:
        """Load the model (a few seconds on CPU)."""
        if self._model is None:
            self._model = await asyncio.to_thread(self._load)

    def _load(self):
        configure_engine_env()
        from sentence_transformers import SentenceTransformer

        model = SentenceTransformer(str(resolve_model(self.model_name, prepare=True)), device=self.device)
        model[0].register_forward_pre_hook(self._count_forward)
        self.dimension = model.get_embedding_dimension()
        return model

    def _count_forward(self, module, args) -> None:
        features = args[0] if args else None
        if isinstance(features, Mapping) and "input_ids" in features:  # a dict or BatchEncoding
            self.forward_batches.append(int(features["input_ids"].shape[0]))

    def encode(self, texts: list[str]) -> list[list[float]]:
        """Embed texts in one model call (blocking); L2-normalized vectors as lists of floats."""
        if self._model is None:
            raise RuntimeError(f"engine {self.name!r} is not started; await engine.start() first")
        if not texts:
            return []
        self.calls.append(len(texts))
        vectors = self._model.encode(texts, batch_size=len(texts), normalize_embeddings=True,
                                     convert_to_numpy=True, show_progress_bar=False)
        return vectors.tolist()

    async def execute(self, op: str, requests: list[dict[str, Any]]) -> list[Any]:
        """One embedding per {"text": str} request, in order."""
        if op not in self.ops:
            raise ValueError(f"engine {self.name!r} (sentence_transformers) runs only 'embedding', not {op!r}")
        texts = []
        for i, req in enumerate(requests):
            text = req.get("text") if isinstance(req, dict) else None
            if not isinstance(text, str):
                raise ValueError(f"embedding request {i} must be {{'text': str}}, got {req!r:.80}")
            texts.append(text)
        return await asyncio.to_thread(self.encode, texts)

    async def stream(self, op: str, requests: list[dict[str, Any]]) -> AsyncIterator[tuple[int, str, Any]]:
        """No partial outputs: yields (i, "final", embedding) per request after the batch."""
        for i, result in enumerate(await self.execute(op, requests)):
            yield i, "final", result

    async def health(self) -> bool:
        return self._model is not None

    async def stop(self) -> None:
        self._model = None
