"""What the OpenAI door does not serve is refused by name, never dropped: image and audio content
parts in a message (a 400 naming that message's content), the `audio` and `modalities` output
fields, and the Responses API (OpenAI's error shape)."""

from __future__ import annotations

import pytest

from tests.unit.server.test_openai_door import serve

IMAGE = {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}
AUDIO = {"type": "input_audio", "input_audio": {"data": "UklGRg==", "format": "wav"}}


@pytest.mark.parametrize("part", [IMAGE, AUDIO])
async def test_image_and_audio_parts_are_refused_naming_the_message(part):
    async with serve() as (http, _, llm):
        messages = [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": [{"type": "text", "text": "What is this?"}, part]},
        ]
        r = await http.post("/v1/chat/completions", json={"model": "agent", "messages": messages})
        assert r.status_code == 400 and r.json()["error"]["param"] == "messages[1].content", r.text
        assert not llm.requests, "a refused request reaches no engine"


@pytest.mark.parametrize(
    "extra, param",
    [
        ({"audio": {"voice": "alloy", "format": "wav"}}, "audio"),
        ({"modalities": ["text", "audio"]}, "modalities"),
    ],
)
async def test_audio_output_is_refused_by_name(extra, param):
    async with serve() as (http, _, llm):
        r = await http.post(
            "/v1/chat/completions",
            json={"model": "agent", "messages": [{"role": "user", "content": "Hi."}], **extra},
        )
        assert r.status_code == 400 and r.json()["error"]["param"] == param, r.text
        assert not llm.requests


async def test_the_responses_api_is_not_served_and_says_so_in_openais_shape():
    async with serve() as (http, _, _llm):
        r = await http.post("/v1/responses", json={"model": "agent", "input": "Hi."})
        assert r.status_code in {404, 405} and set(r.json()["error"]) >= {"message", "type", "code"}, r.text
