"""One emulated call read from an OpenAI request body (chat or text completion): its prompt token
ids, how many tokens it writes and why it stops, and how it answers (streamed or not, with usage).

Like vLLM's server, sampling fields (temperature, top_p, repetition_penalty, logprobs, ...) are
accepted; they change nothing here: the written tokens are the emulator's filler (or the echoed
prompt), and how many there are follows `max_tokens`, `ignore_eos` and the output mode. Refused
with a 400, naming the field: n > 1, several prompts in one request, `echo`, a prompt plus
max_tokens over the context length. A model name other than the served one is a 404, as in vLLM."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from teola.emulate.lengths import OutputLengths
from teola.emulate.tokens import ModelTokens

OUTPUT_MODES = ("sample", "echo")


class EmulatorError(Exception):
    """An error answered in vLLM's shape: {"error": {"message", "type", "param", "code"}}."""

    def __init__(
        self, status: int, message: str, param: str | None = None, kind: str = "BadRequestError"
    ) -> None:
        super().__init__(message)
        self.status, self.message, self.param, self.kind = status, message, param, kind

    def body(self) -> dict[str, Any]:
        return {
            "error": {"message": self.message, "type": self.kind, "param": self.param, "code": self.status}
        }


@dataclass(slots=True)
class Call:
    """What one request asks of the emulated engine."""

    chat: bool
    id: str
    model: str
    prompt_ids: list[int]
    max_tokens: int
    tokens: int  # how many tokens it writes
    reason: str  # "length" (it wrote max_tokens) or "stop" (an emulated end of sequence)
    stream: bool
    include_usage: bool  # stream_options.include_usage: a last chunk with the usage
    continuous_usage: bool  # stream_options.continuous_usage_stats: usage on every chunk
    echo: bool  # the output mode "echo": the written tokens are the prompt's


@dataclass(frozen=True, slots=True)
class CallReader:
    """Reads requests for the served model (`names`: the names it answers to)."""

    tokens: ModelTokens
    lengths: OutputLengths
    names: tuple[str, ...]
    max_model_len: int
    output: str = "sample"

    def read(self, body: Any, chat: bool, request_id: str | None = None) -> Call:
        """The call of a request body; EmulatorError naming the problem."""
        if not isinstance(body, dict):
            raise EmulatorError(400, "the request body must be a JSON object")
        model = body.get("model") or self.names[0]
        if model not in self.names:
            raise EmulatorError(
                404,
                f"The model `{model}` does not exist. Valid aliases: {', '.join(self.names)}.",
                "model",
                "NotFoundError",
            )
        for name, neutral in (("n", 1), ("best_of", 1), ("echo", False)):
            if body.get(name) not in (None, neutral):
                raise EmulatorError(
                    400, f"{name}={body[name]!r:.40} is not served by the emulator (only {neutral!r})", name
                )
        try:
            ids = (
                self.tokens.chat_ids(
                    body.get("messages"), body.get("tools"), body.get("add_generation_prompt", True)
                )
                if chat
                else self.tokens.completion_ids(body.get("prompt"))
            )
        except ValueError as exc:
            raise EmulatorError(400, str(exc), "messages" if chat else "prompt") from None
        max_tokens = self._max_tokens(body, len(ids))
        if body.get("ignore_eos"):
            tokens = max_tokens
        elif self.output == "echo":
            tokens = min(len(ids), max_tokens)
        else:
            tokens = self.lengths.draw(ids, max_tokens, body.get("seed"))
        options = body.get("stream_options") or {}
        prefix = "chatcmpl" if chat else "cmpl"
        return Call(
            chat,
            f"{prefix}-{request_id or uuid.uuid4().hex}",
            model,
            ids,
            max_tokens,
            tokens,
            "length" if tokens >= max_tokens else "stop",
            bool(body.get("stream")),
            bool(options.get("include_usage")),
            bool(options.get("continuous_usage_stats")),
            self.output == "echo",
        )

    def _max_tokens(self, body: dict[str, Any], prompt: int) -> int:
        """max_completion_tokens or max_tokens; without either, what the context leaves (as vLLM)."""
        field = "max_completion_tokens" if body.get("max_completion_tokens") is not None else "max_tokens"
        value = body.get(field)
        room = self.max_model_len - prompt
        if value is None:
            if room < 1:
                raise EmulatorError(
                    400, self._too_long(prompt, 1), "messages" if "messages" in body else "prompt"
                )
            return room
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise EmulatorError(400, f"{field} must be a positive integer, got {value!r:.40}", field)
        if value > room:
            raise EmulatorError(400, self._too_long(prompt, value), field)
        return value

    def _too_long(self, prompt: int, out: int) -> str:
        return (
            f"This model's maximum context length is {self.max_model_len} tokens. However, you requested "
            f"{prompt + out} tokens ({prompt} in the messages, {out} in the completion). Please reduce the "
            "length of the messages or completion."
        )
