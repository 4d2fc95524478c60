"""A conversation as an LLM request carries it (engines/llm_text/chat_messages.py): checked with
errors naming the field, and, for a chat template that knows no tools, rewritten into plain
messages in teola's tool syntax (rendering through a real template: tests/integration)."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from engines.llm_text.chat_messages import fallback_messages, template_takes_tools
from engines.llm_text.llm_requests import check_request
from teola.compile.tool_syntax import parse_tool_call

TOOLS = [{"type": "function", "function": {"name": "weather", "parameters": {"type": "object"}}}]
CALL = {"id": "call_1", "type": "function", "function": {"name": "weather", "arguments": {"city": "Paris"}}}


def test_without_template_support_tools_calls_and_results_are_plain_messages():
    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Paris?"},
        {"role": "assistant", "content": "", "tool_calls": [CALL]},
        {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
        {"role": "user", "content": "And tomorrow?"},
    ]
    plain = fallback_messages(messages, TOOLS)
    assert [m["role"] for m in plain] == ["system", "user", "assistant", "user"]
    assert plain[0]["content"].startswith(
        "Be brief.\n\nYou can call these tools:\n" + json.dumps(TOOLS[0]["function"])
    )
    call = parse_tool_call(plain[2]["content"].removesuffix("</tool>"))  # the syntax teola's agents parse
    assert (call.name, call.arguments) == ("weather", {"city": "Paris"})
    assert plain[3]["content"] == "<result>sunny</result>\nAnd tomorrow?"  # results merged into the user turn
    assert fallback_messages(messages[1:2], None) == [{"role": "user", "content": "Paris?"}]


def test_templates_that_render_tools_are_recognised():
    assert template_takes_tools(
        SimpleNamespace(chat_template="{% if tools %}{{ tools | tojson }}{% endif %}")
    )
    assert not template_takes_tools(
        SimpleNamespace(chat_template="{% for m in messages %}{{ m.content }}{% endfor %}")
    )


@pytest.mark.parametrize(
    "extra, words",
    [
        ({"messages": [{"role": "wizard", "content": "x"}]}, r"'messages'\[0\]"),
        ({"messages": [{"role": "user", "content": "x"}], "raw_prompt": "x"}, "not both"),
        ({"tools": TOOLS}, "needs 'messages'"),
        ({"top_p": 0}, "top_p"),
        ({"frequency_penalty": 9}, "frequency_penalty"),
    ],
)
def test_bad_chat_and_sampling_fields_are_named(extra, words):
    with pytest.raises(ValueError, match=words):
        check_request("decoding", {"parts": [["user", "x"]], **extra}, 16)


def test_checked_requests_keep_the_conversation_and_sampling_fields():
    req = check_request(
        "decoding",
        {
            "parts": [["user", "x"]],
            "messages": [{"role": "user", "content": "x"}],
            "tools": TOOLS,
            "top_p": 0.9,
            "json_object": True,
        },
        16,
    )
    assert (req["tools"], req["top_p"], req["json_object"], req["presence_penalty"]) == (
        TOOLS,
        0.9,
        True,
        0.0,
    )
    with pytest.raises(ValueError, match="decoding"):
        check_request("prefilling", {"parts": [["user", "x"]], "raw_prompt": "x"}, 16)
