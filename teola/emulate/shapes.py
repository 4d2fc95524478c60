"""vLLM's OpenAI-compatible answers, field for field as `vllm serve` (0.32) writes them: a chat or
text completion, its stream chunks (server-sent events ending with `data: [DONE]`), and `usage`
with `prompt_tokens_details.cached_tokens` (the prefix-cache hit, as vLLM reports it with
--enable-prompt-tokens-details). A stream chunk is formatted from a prefix built once per call,
since a chunk goes out for every written token."""

from __future__ import annotations

import json
import time
from typing import Any

from teola.emulate.call import Call

DONE = "data: [DONE]\n\n"


def usage(prompt: int, completion: int, cached: int) -> dict[str, Any]:
    return {
        "prompt_tokens": prompt,
        "total_tokens": prompt + completion,
        "completion_tokens": completion,
        "prompt_tokens_details": {"cached_tokens": cached},
    }


def result_usage(result: dict[str, Any]) -> dict[str, Any]:
    """The usage of a finished call from the simulated engine's counts."""
    return usage(
        int(result["num_prompt_tokens"]),
        int(result.get("num_output_tokens", 0)),
        int(result.get("num_cached_tokens", 0)),
    )


def response(call: Call, text: str, result: dict[str, Any]) -> dict[str, Any]:
    """The non-streamed answer."""
    if call.chat:
        choice: dict[str, Any] = {
            "index": 0,
            "message": {
                "role": "assistant",
                "content": text,
                "refusal": None,
                "annotations": None,
                "audio": None,
                "function_call": None,
                "tool_calls": [],
                "reasoning_content": None,
            },
            "logprobs": None,
            "finish_reason": call.reason,
            "stop_reason": None,
        }
    else:
        choice = {
            "index": 0,
            "text": text,
            "logprobs": None,
            "finish_reason": call.reason,
            "stop_reason": None,
            "prompt_logprobs": None,
        }
    body = {
        "id": call.id,
        "object": "chat.completion" if call.chat else "text_completion",
        "created": int(time.time()),
        "model": call.model,
        "choices": [choice],
    }
    if call.chat:
        body.update(service_tier=None, system_fingerprint=None)
    body.update(usage=result_usage(result), prompt_logprobs=None, kv_transfer_params=None)
    return body


class ChunkWriter:
    """The server-sent events of one streamed call."""

    def __init__(self, call: Call) -> None:
        self.call = call
        kind = "chat.completion.chunk" if call.chat else "text_completion"
        self._head = (
            f'data: {{"id":{json.dumps(call.id)},"object":"{kind}","created":{int(time.time())},'
            f'"model":{json.dumps(call.model)},"choices":['
        )

    def first(self) -> str:
        """A chat stream's opening chunk (the assistant role, empty content); "" for completions."""
        if not self.call.chat:
            return ""
        return self._event(
            '{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}',
            self._usage(0, 0),
        )

    def token(self, text: str, written: int, finish: bool) -> str:
        """The chunk of one written token (`written`: tokens so far); the last carries finish_reason."""
        reason = f'"{self.call.reason}"' if finish else "null"
        content = json.dumps(text, ensure_ascii=False)
        if self.call.chat:
            choice = f'{{"index":0,"delta":{{"content":{content}}},"logprobs":null,"finish_reason":{reason}'
        else:
            choice = f'{{"index":0,"text":{content},"logprobs":null,"finish_reason":{reason}'
        stop = ',"stop_reason":null}' if finish else "}"
        return self._event(choice + stop, self._usage(written, 0))

    def last(self, result: dict[str, Any]) -> str:
        """The usage chunk (no choices) when the client asked for include_usage; "" otherwise."""
        if not self.call.include_usage:
            return ""
        return f'{self._head}],"usage":{_compact(result_usage(result))}}}\n\n'

    def _usage(self, written: int, cached: int) -> str | None:
        if not self.call.continuous_usage:
            return None
        return _compact(usage(len(self.call.prompt_ids), written, cached))

    def _event(self, choice: str, use: str | None) -> str:
        return f"{self._head}{choice}]" + (f',"usage":{use}' if use else "") + "}\n\n"


def _compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))
