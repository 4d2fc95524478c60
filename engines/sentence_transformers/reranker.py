"""The reranking engine: scores (query, text) pairs, higher = more relevant.

With `model=<path>` it runs that sentence-transformers `CrossEncoder` (what production deployments use,
e.g. a local copy of cross-encoder/ms-marco-MiniLM-L-6-v2). No pip package ships cross-encoder weights,
so the offline default is documented as what it is: the cosine similarity of MiniLM bi-encoder embeddings
of the query and the text. That is a real relevance signal (the same model retrieval uses), not a trained
reranker; `self.mode` says which one is running ("cross_encoder", "bi_encoder_cosine" or
"cross_encoder_shape").

For benchmarks, `cross_encoder_shape=True` runs a `CrossEncoder` built on the bi-encoder's own weights
with an untrained scoring head (seeded, so runs agree): it costs what a MiniLM cross-encoder costs (each
(query, text) pair through the model together) and, like one, does not rank by the search's cosine,
so no pass may prove the query expansion useless; its scores carry no relevance, so it is for timing
studies only, never for answer quality.
"""

from __future__ import annotations

from typing import Any

from engines.assets.models import MINILM, resolve_model
from engines.assets.paths import configure_engine_env
from engines.machine.op_costs import probe_words
from engines.protocol import EngineProfile
from engines.requests import PrimOp
from engines.sentence_transformers.adapter import SentenceTransformersAdapter


class RerankerEngine(SentenceTransformersAdapter):
    """Options: model (a CrossEncoder folder; omitted = the MiniLM cosine default), bi_encoder
    (the embedding model for the default; "all-minilm-l6-v2"), cross_encoder_shape (False; True:
    a cross-encoder's cost and ranking kind on the bi-encoder's weights, for timing studies; see the
    module docstring), device (None = library choice),
    max_batch (64), max_efficient_batch (32), torch_threads, exclusive, share_cores, costs (see
    SentenceTransformersAdapter)."""

    ops = frozenset({PrimOp.RERANKING})
    kind = "reranker"
    default_profile = EngineProfile(max_batch=64, max_efficient_batch=32)

    @staticmethod
    def ranks_by(options: dict[str, Any]) -> str:
        """The default scores by the bi-encoder's cosine; a cross-encoder by what it learned ("")."""
        if options.get("model") is not None or options.get("cross_encoder_shape"):
            return ""
        return f"cosine:{options.get('bi_encoder', MINILM)}"

    def __init__(
        self,
        name: str,
        model: str | None = None,
        bi_encoder: str = MINILM,
        device: str | None = None,
        max_batch: int | None = None,
        max_efficient_batch: int | None = None,
        torch_threads: int | None = None,
        exclusive: bool = False,
        share_cores: bool = False,
        cross_encoder_shape: bool = False,
        costs: bool | str = True,
    ):
        if not isinstance(cross_encoder_shape, bool):
            raise ValueError(
                f"engine {name!r}: option cross_encoder_shape must be true or false, "
                f"got {cross_encoder_shape!r}"
            )
        if cross_encoder_shape and model is not None:
            raise ValueError(
                f"engine {name!r}: cross_encoder_shape builds its CrossEncoder from the bi_encoder's "
                f"weights; give model= (a trained CrossEncoder) or cross_encoder_shape=True, not both"
            )
        if model is not None and not isinstance(model, str):
            raise ValueError(
                f"engine {name!r}: option model must be the path of a sentence-transformers "
                f"CrossEncoder folder, or omitted for the offline MiniLM cosine scorer"
            )
        super().__init__(
            name, device, max_batch, max_efficient_batch, torch_threads, exclusive, share_cores, costs
        )
        self.model_name = model
        self.bi_encoder_name = bi_encoder
        self.mode = (
            "cross_encoder"
            if model is not None
            else "cross_encoder_shape"
            if cross_encoder_shape
            else "bi_encoder_cosine"
        )
        self.ranking = self.ranks_by(
            {"model": model, "bi_encoder": bi_encoder, "cross_encoder_shape": cross_encoder_shape}
        )

    def _load(self) -> Any:
        configure_engine_env()
        if self.mode == "cross_encoder":
            from sentence_transformers import CrossEncoder

            return CrossEncoder(str(resolve_model(self.model_name)), device=self.device)
        if self.mode == "cross_encoder_shape":
            import torch
            from sentence_transformers import CrossEncoder

            torch.manual_seed(0)  # the untrained head: the same scores in every run
            return CrossEncoder(
                str(resolve_model(self.bi_encoder_name, prepare=True)), num_labels=1, device=self.device
            )
        from sentence_transformers import SentenceTransformer

        return SentenceTransformer(str(resolve_model(self.bi_encoder_name, prepare=True)), device=self.device)

    def score(self, pairs: list[tuple[str, str]]) -> list[float]:
        """Relevance of each (query, text) pair (blocking; one model call per batch)."""
        model = self._require_model()
        if not pairs:
            return []
        self.calls.append(len(pairs))
        if self.mode != "bi_encoder_cosine":
            scores = model.predict(
                pairs, batch_size=len(pairs), show_progress_bar=False, convert_to_numpy=True
            )
            return [float(s) for s in scores]
        queries = sorted({q for q, _ in pairs})
        texts = [t for _, t in pairs]
        vectors = model.encode(
            queries + texts,
            batch_size=len(queries) + len(texts),
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        row = {q: i for i, q in enumerate(queries)}
        offset = len(queries)
        return [float(vectors[row[q]] @ vectors[offset + i]) for i, (q, _) in enumerate(pairs)]

    def _inputs(self, requests: list[dict[str, Any]]) -> list[tuple[str, str]]:
        pairs = []
        for i, req in enumerate(requests):
            if not (
                isinstance(req, dict)
                and isinstance(req.get("query"), str)
                and isinstance(req.get("text"), str)
            ):
                raise ValueError(
                    f"reranking request {i} must be {{'query': str, 'text': str}}, got {req!r:.80}"
                )
            pairs.append((req["query"], req["text"]))
        return pairs

    def _probe_request(self, i: int, salt: str) -> dict[str, Any]:
        return {"query": f"{salt}: which mills stand by the river", "text": probe_words(i, salt)}

    def _run(self, inputs: list[tuple[str, str]]) -> list[float]:
        return self.score(inputs)
