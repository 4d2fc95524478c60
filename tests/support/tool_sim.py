"""`ToolCallingSim`: the deterministic simulated LLM of the door tests, extended to use tools. Offered
tools in a conversation ("messages" and "tools" requests), it calls them one after the other, in
teola's tool syntax (engines/llm_text/chat_messages.py), each with {"query": <the user's last
question>}; once every tool's result came back it answers with the results it read."""

from __future__ import annotations

import json
from typing import Any

from engines.llm_text.chat_messages import TOOL_CLOSE, TOOL_OPEN
from engines.sim.sim_engine import SimEngine, words


class ToolCallingSim(SimEngine):
    def _decode(self, r: dict[str, Any]) -> dict[str, Any]:
        out = super()._decode(r)
        messages, tools = r.get("messages") or [], r.get("tools") or []
        if not tools:
            return out
        results = [m["content"] for m in messages if m["role"] == "tool"]
        if len(results) < len(tools):
            question = next(m["content"] for m in reversed(messages) if m["role"] == "user")
            call = {"name": tools[len(results)]["function"]["name"], "arguments": {"query": question}}
            text = f"Let me check. {TOOL_OPEN}{json.dumps(call)}{TOOL_CLOSE}"
        else:
            text = "From the tools: " + "; ".join(results)
        return {**out, "text": text, "num_output_tokens": len(words(text))}
