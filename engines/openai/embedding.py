"""Remote embeddings: any server with the OpenAI embeddings API shape (`POST /v1/embeddings`, e.g.
`vllm serve <embedding model>` or a text-embeddings server) behind the teola engine protocol. A
batch of n requests is one HTTP request with n inputs; vectors are L2-normalized here, as the
protocol promises, whatever the server returns. Requests go through the official `openai` async
client (engines.openai.client: pooled connections, retries honouring Retry-After)."""

from __future__ import annotations

import math
from collections.abc import AsyncIterator
from typing import Any

from engines.openai.client import RemoteClient, RemoteEngineError, check_client_options
from engines.protocol import EngineProfile, StreamEvent, profile_with
from engines.requests import PrimOp


class OpenAIEmbeddingEngine:
    """Options: url (required: the server's base URL), model (the served model name, default
    "all-minilm-l6-v2"), api_key, max_batch (64), max_efficient_batch (32), timeout (120 s),
    connect_timeout (10), retries (3: attempts after the first on connection errors, 408/409/429 and
    5xx answers, with the openai client's jittered backoff honouring Retry-After), max_connections (16).
    Instances of an `Engine` with `urls=[...]` each take one URL."""

    ops = frozenset({PrimOp.EMBEDDING})
    default_profile = EngineProfile(max_batch=64, max_efficient_batch=32)

    def __init__(
        self,
        name: str,
        url: str | None = None,
        model: str = "all-minilm-l6-v2",
        api_key: str | None = None,
        max_batch: int | None = None,
        max_efficient_batch: int | None = None,
        timeout: float = 120.0,
        connect_timeout: float = 10.0,
        retries: int = 3,
        max_connections: int = 16,
    ):
        self.base_url = check_client_options(name, url, timeout, connect_timeout, retries, max_connections)
        if not isinstance(model, str) or not model:
            raise ValueError(f"engine {name!r}: option model must be the served model name, got {model!r}")
        self.name = name
        self.model = model
        self.profile = profile_with(self.default_profile, max_batch, max_efficient_batch)
        self._client_args = (api_key, timeout, connect_timeout, retries, max_connections)
        self.client: RemoteClient | None = None
        self.calls: list[int] = []  # batch size of every HTTP request

    async def start(self) -> None:
        """Open the connection pool and check that the server answers (retried while it comes up)."""
        if self.client is not None:
            return
        client = RemoteClient(self.name, self.base_url, *self._client_args)
        try:
            await self._embed(client, ["ping"])
        except BaseException:
            await client.aclose()
            raise
        self.client = client

    async def health(self) -> bool:
        """True while the server answers /health with 200."""
        if self.client is None:
            return False
        answer = await self.client.get("/health")
        return answer is not None and answer.status_code == 200

    async def stop(self) -> None:
        client, self.client = self.client, None
        if client is not None:
            await client.aclose()

    async def execute(self, op: str, requests: list[dict[str, Any]]) -> list[Any]:
        """Embed a batch in one request; one L2-normalized vector per request, in order."""
        if op != PrimOp.EMBEDDING:
            raise ValueError(f"engine {self.name!r} (openai embeddings) runs only 'embedding', not {op!r}")
        if self.client is None:
            raise RuntimeError(f"engine {self.name!r} is not started; await engine.start() first")
        texts = []
        for r in requests:
            if not isinstance(r, dict) or not isinstance(r.get("text"), str):
                raise ValueError(f"embedding request must be {{'text': str}}, got {r!r:.80}")
            texts.append(r["text"])
        if not texts:
            return []
        self.calls.append(len(texts))
        data = sorted(await self._embed(self.client, texts), key=lambda d: d.index)
        if len(data) != len(texts):
            raise RemoteEngineError(
                f"engine {self.name!r}: asked for {len(texts)} embeddings, got {len(data)}"
            )
        return [_normalized(d.embedding) for d in data]

    async def _embed(self, client: RemoteClient, texts: list[str]) -> list[Any]:
        import openai

        try:
            answer = await client.api.embeddings.create(
                model=self.model, input=texts, encoding_format="float"
            )
        except openai.APIError as exc:
            raise client.error("embeddings", exc) from exc
        return list(answer.data or [])

    async def stream(
        self, op: str, requests: list[dict[str, Any]]
    ) -> AsyncIterator[tuple[int, StreamEvent, Any]]:
        """No partial outputs: yields (i, "final", result) per request after the batch."""
        for i, result in enumerate(await self.execute(op, requests)):
            yield i, StreamEvent.FINAL, result


def _normalized(vector: list[float]) -> list[float]:
    norm = math.sqrt(sum(x * x for x in vector)) or 1.0
    return [x / norm for x in vector]
