"""The emulated vLLM server: a FastAPI app with vLLM's OpenAI-compatible endpoints whose answers are
timed by simulated engines on the wall clock.

    POST /v1/completions, /v1/chat/completions   (streamed or not; teola/emulate/shapes.py)
    GET  /v1/models, /health, /version, /metrics (vLLM's metric names: teola/emulate/metrics.py)

A request is tokenized with the model's tokenizer (teola/emulate/tokens.py), read into a `Call`
(teola/emulate/call.py: how many tokens it writes), and its prompt token ids go to the least loaded
simulated engine (teola/emulate/pool.py), which writes its tokens as the profile's GPU would."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse

from teola.emulate import metrics
from teola.emulate.call import Call, CallReader, EmulatorError
from teola.emulate.lengths import OutputLengths
from teola.emulate.pool import EnginePool
from teola.emulate.settings import EmulatorSettings
from teola.emulate.shapes import DONE, ChunkWriter, response
from teola.emulate.tokens import ModelTokens

VERSION = "0.32.0"  # the vLLM version whose API the emulator answers with


class Emulator:
    """The engines, tokenizer and request reader of one emulated server."""

    def __init__(self, settings: EmulatorSettings, tokens: ModelTokens | None = None) -> None:
        self.settings = settings
        self.pool = EnginePool(settings.profile, settings.instances, settings.max_model_len)
        lengths = OutputLengths(settings.output_len, settings.seed)
        self.tokens = tokens or ModelTokens(settings.model)  # last: loading transformers takes seconds
        self.reader = CallReader(
            self.tokens, lengths, settings.names, self.pool.max_model_len, settings.output
        )
        self.created = int(time.time())
        self.cpu_at_start = 0.0  # process CPU seconds when the engines started

    def served(self) -> int:
        """Calls finished or aborted so far."""
        return sum(sum(s.finished.values()) for s in self.pool.states())

    def cpu_seconds(self) -> float:
        """Process CPU seconds (user + system) since the engines started."""
        return _cpu() - self.cpu_at_start

    def written(self, call: Call) -> list[int]:
        """The ids of the tokens a call writes, cycled: the filler's, or the prompt's when echoing."""
        return call.prompt_ids if call.echo else [self.tokens.filler_id]

    def piece(self, call: Call) -> Callable[[int], str]:
        """The text of written token k (0-based) of a call."""
        if not call.echo:
            filler = self.tokens.filler_text
            return lambda k: filler
        pieces = self.tokens.pieces(call.prompt_ids)
        return lambda k: pieces[k % len(pieces)]

    async def answer(self, call: Call) -> dict[str, Any]:
        result = await self.pool.complete(call.prompt_ids, call.tokens, call.reason, self.written(call))
        piece = self.piece(call)
        return response(call, "".join(piece(k) for k in range(int(result["num_output_tokens"]))), result)

    async def events(self, call: Call) -> AsyncIterator[str]:
        writer, piece = ChunkWriter(call), self.piece(call)
        if first := writer.first():
            yield first
        result: dict[str, Any] = {}
        stream = self.pool.generate(call.prompt_ids, call.tokens, call.reason, self.written(call))
        try:
            async for kind, value in stream:
                if kind == "token":
                    yield writer.token(piece(value - 1), value, value >= call.tokens)
                else:
                    result = value
        finally:
            await stream.aclose()  # a client that left: the call is aborted
        if last := writer.last(result):
            yield last
        yield DONE

    def models(self) -> dict[str, Any]:
        return {
            "object": "list",
            "data": [
                {
                    "id": name,
                    "object": "model",
                    "created": self.created,
                    "owned_by": "vllm",
                    "root": str(self.tokens.path),
                    "parent": None,
                    "max_model_len": self.pool.max_model_len,
                    "permission": [
                        {
                            "id": f"modelperm-{name}",
                            "object": "model_permission",
                            "created": self.created,
                            "allow_create_engine": False,
                            "allow_sampling": True,
                            "allow_logprobs": True,
                            "allow_search_indices": False,
                            "allow_view": True,
                            "allow_fine_tuning": False,
                            "organization": "*",
                            "group": None,
                            "is_blocking": False,
                        }
                    ],
                }
                for name in self.settings.names
            ],
        }


def create_emulator(
    settings: EmulatorSettings,
    tokens: ModelTokens | None = None,
    on_stop: Callable[[Emulator], None] | None = None,
) -> FastAPI:
    """The FastAPI app of an emulated vLLM server (its engines start with the app's lifespan and
    `on_stop` is called with the `Emulator` as they stop); `app.state.emulator` is the `Emulator`."""
    emulator = Emulator(settings, tokens)

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        emulator.cpu_at_start = _cpu()
        await emulator.pool.start()
        try:
            yield
        finally:
            await emulator.pool.stop()
            if on_stop is not None:
                on_stop(emulator)

    app = FastAPI(title="teola emulate", version=VERSION, lifespan=lifespan)
    app.state.emulator = emulator

    _add_completion_routes(app, emulator)
    _add_status_routes(app, emulator, settings)
    return app


def _add_completion_routes(app: FastAPI, emulator: Emulator) -> None:
    """/v1/completions and /v1/chat/completions, whole or streamed."""

    async def complete(request: Request, chat: bool) -> Response:
        try:
            body = await request.json()
        except ValueError:
            return JSONResponse(
                EmulatorError(400, "the request body is not valid JSON").body(), status_code=400
            )
        try:
            call = emulator.reader.read(body, chat, request.headers.get("x-request-id"))
        except EmulatorError as exc:
            return JSONResponse(exc.body(), status_code=exc.status)
        if call.stream:
            return StreamingResponse(emulator.events(call), media_type="text/event-stream")
        return JSONResponse(await emulator.answer(call))

    @app.post("/v1/completions")
    async def completions(request: Request) -> Response:
        return await complete(request, chat=False)

    @app.post("/v1/chat/completions")
    async def chat_completions(request: Request) -> Response:
        return await complete(request, chat=True)


def _add_status_routes(app: FastAPI, emulator: Emulator, settings: EmulatorSettings) -> None:
    """/v1/models, /health, /version and /metrics, as vLLM serves them."""

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        return emulator.models()

    @app.get("/health")
    async def health() -> Response:
        return Response(status_code=200)

    @app.get("/version")
    async def version() -> dict[str, str]:
        return {"version": VERSION}

    @app.get("/metrics")
    async def prometheus() -> Response:
        text = metrics.render(settings.names[0], emulator.pool.states())
        return PlainTextResponse(text, media_type="text/plain; version=0.0.4; charset=utf-8")


def _cpu() -> float:
    t = os.times()
    return t.user + t.system
