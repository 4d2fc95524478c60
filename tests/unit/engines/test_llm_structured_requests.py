"""Structured outputs and logprobs on the LLM request path: the typed request fields are checked
once (engines/llm_text/llm_requests.py), reach vLLM as its StructuredOutputsParams and logprobs
(engines/vllm/engine.py) and a remote server as `response_format` and `logprobs`
(engines/openai/llm.py), and each adapter declares what it provides (Feature)."""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace

import pytest

from engines.llm_text.llm_requests import check_request
from engines.openai.capabilities import Capabilities
from engines.openai.llm import OpenAILLMEngine
from engines.openai.wire import completion_logprobs
from engines.protocol import Feature
from engines.vllm.engine import VLLMEngine
from engines.vllm.sampling import structured_outputs, token_logprobs

SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}}
PARTS = [["user", "Weather?"]]


def test_the_fields_are_checked_with_their_defaults():
    req = check_request("decoding", {"parts": PARTS}, 16)
    assert (req["json_schema"], req["logprobs"], req["json_object"]) == (None, None, False)
    req = check_request("decoding", {"parts": PARTS, "json_schema": SCHEMA, "logprobs": 3}, 16)
    assert (req["json_schema"], req["logprobs"]) == (SCHEMA, 3)


@pytest.mark.parametrize(
    "fields, words",
    [
        ({"json_schema": "object"}, "'json_schema' must be a JSON schema object"),
        ({"json_schema": SCHEMA, "json_object": True}, "not both"),
        ({"logprobs": 21}, "'logprobs' must be None or an int in [0, 20]"),
        ({"logprobs": True}, "'logprobs'"),
    ],
)
def test_bad_fields_name_themselves(fields, words):
    with pytest.raises(ValueError, match=words.replace("[", r"\[").replace("]", r"\]")):
        check_request("decoding", {"parts": PARTS, **fields}, 16)


@dataclass
class Params:
    json: dict | None = None
    json_object: bool | None = None


def test_vllm_gets_a_schema_or_a_json_object_and_declares_both_features():
    assert structured_outputs({"json_schema": SCHEMA, "json_object": False}, Params) == Params(json=SCHEMA)
    assert structured_outputs({"json_schema": None, "json_object": True}, Params) == Params(json_object=True)
    assert structured_outputs({"json_schema": None, "json_object": False}, Params) is None
    assert VLLMEngine("llm").profile.features == {Feature.STRUCTURED_OUTPUTS, Feature.LOGPROBS}


def test_vllm_logprobs_become_openais_per_token_shape():
    lp = lambda value, rank, text: SimpleNamespace(logprob=value, rank=rank, decoded_token=text)  # noqa: E731
    # the sampled token (7) ranked 2nd; vLLM adds it beside the top-k when it is outside them; the
    # end-of-turn token (2) is left out like the text leaves it out
    output = SimpleNamespace(
        token_ids=[7, 9, 2],
        logprobs=[
            {5: lp(-0.1, 1, "A"), 7: lp(-2.0, 2, "é")},
            {9: lp(-0.5, 1, "b"), 3: lp(-3.0, 4, "c")},
            {2: lp(-0.01, 1, "<|im_end|>")},
        ],
    )
    first, second = token_logprobs(output, 1, frozenset({2}))
    assert first == {
        "token": "é",
        "logprob": -2.0,
        "bytes": [195, 169],
        "top_logprobs": [{"token": "A", "logprob": -0.1, "bytes": [65]}],
    }
    assert second["token"] == "b" and [t["token"] for t in second["top_logprobs"]] == ["b"]


def remote(vllm_fields: bool) -> OpenAILLMEngine:
    engine = OpenAILLMEngine("llm", url="http://gpu-box:8000")
    engine.caps = Capabilities(vllm_fields=vllm_fields)
    return engine


def test_a_remote_server_gets_response_format_and_logprobs():
    req = check_request("decoding", {"parts": PARTS, "json_schema": SCHEMA, "logprobs": 2}, 16)
    body = remote(True)._body(False, req, [1, 2, 3])
    assert body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "output", "schema": SCHEMA},
    }
    assert body["logprobs"] == 2
    prefill = remote(True)._body(True, req, [1, 2, 3])
    assert "response_format" not in prefill and "logprobs" not in prefill


def test_remote_logprobs_become_openais_per_token_shape():
    chunk = {
        "tokens": ["Hi", "!", "<|im_end|>"],
        "token_logprobs": [-0.5, None, -0.1],
        "top_logprobs": [{"Hi": -0.5, "Hello": -1.5, "Hey": -2.0}, None, None],
    }
    first, second = completion_logprobs(chunk, 2, frozenset({"<|im_end|>"}))
    assert first["token"] == "Hi" and [t["token"] for t in first["top_logprobs"]] == ["Hi", "Hello"]
    assert second == {"token": "!", "logprob": -9999.0, "bytes": [33], "top_logprobs": []}
