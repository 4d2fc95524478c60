"""``POST /v1/embeddings`` on the OpenAI-compatible door: OpenAI's embeddings API over an app's
embedding engine. ``model`` is ``"<app>/<engine>"`` or an app (its engine named "embedding", or its
only one); ``input`` a string or a list of strings (token ids are refused: they are another model's
vocabulary); ``encoding_format`` "float" (the default) or "base64" (little-endian float32, what the
official SDK asks for); ``dimensions`` only at the model's own size; ``user`` accepted.

The texts are one query of one EMBEDDING primitive (teola.compile.single_primitive), run like any
query (tenant, time limit, /metrics, /ui), so the engine's scheduler batches them with every other
query's embeddings. ``usage.prompt_tokens`` counts the texts in the engine model's tokenizer when
its kind declares one on disk, else estimates them (4 bytes a token)."""

from __future__ import annotations

import base64
import struct
from typing import Any

from fastapi import Request

import teola.server.openai.models as door_models
from teola.compile.chunk_tokenizer import chunk_tokenizer
from teola.compile.single_primitive import embedding_query
from teola.server.errors import ApiError
from teola.server.queries import run_query, tenant_config
from teola.server.quotas import estimate_tokens
from teola.server.state import ServerState
from teola.server.streaming import unless_disconnected

MAX_INPUTS = 2048  # OpenAI's own limit on inputs per request
FIELDS = frozenset({"model", "input", "encoding_format", "dimensions", "user"})
ENCODINGS = ("float", "base64")


def embedding_engines(app: Any) -> list[str]:
    """The app's engines that run embedding."""
    return door_models.engines_running(app, "embedding")


def _invalid(detail: str, param: str, code: str = "invalid_value") -> ApiError:
    return ApiError(400, code, detail, param=param)


def inputs(body: dict[str, Any]) -> list[str]:
    """The texts of a request; 400 naming the field otherwise."""
    unknown = sorted(k for k, v in body.items() if k not in FIELDS and v is not None)
    if unknown:
        raise _invalid(
            f"unsupported parameter(s) {', '.join(map(repr, unknown))}: /v1/embeddings serves "
            f"{', '.join(sorted(FIELDS))}",
            unknown[0],
            "unsupported_parameter",
        )
    texts = body.get("input")
    texts = [texts] if isinstance(texts, str) else texts
    if not isinstance(texts, list) or not texts or not all(isinstance(t, str) for t in texts):
        raise _invalid(
            f"input must be a string or a non-empty list of strings (token ids are not served), got "
            f"{body.get('input')!r:.80}",
            "input",
        )
    if len(texts) > MAX_INPUTS or not all(texts):
        raise _invalid(
            f"input holds 1 to {MAX_INPUTS} non-empty strings, got {len(texts)}"
            f"{' with an empty one' if not all(texts) else ''}",
            "input",
        )
    if body.get("encoding_format") is not None and body["encoding_format"] not in ENCODINGS:
        raise _invalid(
            f"encoding_format must be 'float' or 'base64', got {body['encoding_format']!r:.40}",
            "encoding_format",
        )
    dims = body.get("dimensions")
    if dims is not None and (isinstance(dims, bool) or not isinstance(dims, int) or dims < 1):
        raise _invalid(f"dimensions must be a positive int, got {dims!r:.40}", "dimensions")
    return texts


def _encoded(vector: Any, encoding: str) -> Any:
    values = [float(x) for x in vector]
    if encoding == "base64":
        return base64.b64encode(struct.pack(f"<{len(values)}f", *values)).decode()
    return values


async def embeddings(state: ServerState, request: Request, body: dict[str, Any]) -> dict[str, Any]:
    """The OpenAI embeddings answer of one request (see the module docstring)."""
    texts = inputs(body)
    app_name, app, engine = door_models.resolve(
        state, body.get("model"), "embedding", "embedding", "embedding engine"
    )
    spec = app.engines[engine]
    if app.runtime is None:
        await app.start()
    config: dict[str, Any] = {}
    tenant_config(state, request.state.tenant, config)
    compiled = embedding_query(spec, texts)
    state.metrics.queries.labels(app_name).inc()
    state.recent.begin(request.state.tenant, app_name, compiled)
    config["timeout"] = state.settings.query_timeout
    slot = request.state.slot
    work = run_query(state, app_name, app, compiled, config, state.settings.query_timeout, slot=slot)
    result = await unless_disconnected(state, app_name, request, work)
    vectors = result.output
    dims = body.get("dimensions")
    if dims is not None and vectors and dims != len(vectors[0]):
        raise _invalid(
            f"dimensions {dims} is not served: {body['model']} embeds in {len(vectors[0])} dimensions "
            "(shortened vectors are not served)",
            "dimensions",
            "unsupported_value",
        )
    counter = chunk_tokenizer(spec)
    tokens = sum(counter.count(t) if counter is not None else estimate_tokens(t) for t in texts)
    slot.charge(tokens)
    encoding = body.get("encoding_format") or "float"
    return {
        "object": "list",
        "model": body["model"],
        "data": [
            {"object": "embedding", "index": i, "embedding": _encoded(v, encoding)}
            for i, v in enumerate(vectors)
        ],
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
    }
