"""The embedding engine: a sentence-transformers bi-encoder behind the teola engine protocol.

A batch of n requests is one `encode` call with batch_size=n (one forward pass of the model), run in a
worker thread so the event loop keeps serving other engines while the model computes.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from engines.assets.models import MINILM, resolve_model
from engines.assets.paths import configure_engine_env
from engines.machine.op_costs import probe_words
from engines.protocol import EngineProfile
from engines.requests import PrimOp
from engines.sentence_transformers.adapter import SentenceTransformersAdapter


class EmbeddingEngine(SentenceTransformersAdapter):
    """Options: model (short name or sentence-transformers folder; default "all-minilm-l6-v2"),
    device (None = sentence-transformers' choice: cuda if available, else cpu), max_batch (64),
    max_efficient_batch (32), torch_threads, exclusive, share_cores, costs (see
    SentenceTransformersAdapter).

    `calls` lists the batch size of every `execute` (one encode call each); `forward_batches` lists the
    batch size of every forward pass of the model, so a test can check that a batch is one model call.
    """

    ops = frozenset({PrimOp.EMBEDDING})
    kind = "sentence_transformers"
    default_profile = EngineProfile(max_batch=64, max_efficient_batch=32)

    @staticmethod
    def ranks_by(options: dict[str, Any]) -> str:
        """Its vectors are compared by cosine (engines.registry.kind_ranks_by)."""
        return f"cosine:{options.get('model', MINILM)}"

    @staticmethod
    def tokenizer_dir(options: dict[str, Any]) -> Path | None:
        """Its model's folder when that holds a tokenizer.json (engines.registry.kind_tokenizer_dir);
        None when the model is not on disk (a known name not prepared, a missing package)."""
        try:
            folder = resolve_model(options.get("model", MINILM))
        except (ValueError, RuntimeError):
            return None
        return folder if (folder / "tokenizer.json").is_file() else None

    def __init__(
        self,
        name: str,
        model: str = MINILM,
        device: str | None = None,
        max_batch: int | None = None,
        max_efficient_batch: int | None = None,
        torch_threads: int | None = None,
        exclusive: bool = False,
        share_cores: bool = False,
        costs: bool | str = True,
    ):
        self.forward_batches: list[int] = []
        super().__init__(
            name, device, max_batch, max_efficient_batch, torch_threads, exclusive, share_cores, costs
        )
        self.model_name = model
        self.ranking = self.ranks_by({"model": model})
        self.dimension: int | None = None

    def _load(self) -> Any:
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
        model = self._require_model()
        if not texts:
            return []
        self.calls.append(len(texts))
        vectors = model.encode(
            texts,
            batch_size=len(texts),
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        return vectors.tolist()

    def _inputs(self, requests: list[dict[str, Any]]) -> list[str]:
        texts = []
        for i, req in enumerate(requests):
            text = req.get("text") if isinstance(req, dict) else None
            if not isinstance(text, str):
                raise ValueError(f"embedding request {i} must be {{'text': str}}, got {req!r:.80}")
            texts.append(text)
        return texts

    def _run(self, inputs: list[str]) -> list[list[float]]:
        return self.encode(inputs)

    def _probe_request(self, i: int, salt: str) -> dict[str, Any]:
        return {"text": probe_words(i, salt)}

    def _forget_probe(self) -> None:
        super()._forget_probe()
        self.forward_batches.clear()
