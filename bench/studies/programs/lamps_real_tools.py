"""The requests' side of the LAMPS study on real engines (bench/studies/programs/lamps_real.py): the API types
and their durations, the prompt words, and the tools a request calls at its pauses (a loopback web API
answering after ToolBench's delays, the calculator, the Wikipedia lookup) with the text their results
add to the context."""

from __future__ import annotations

import asyncio
import random
from typing import Any

from bench.lib.results import serve_in_thread
from bench.studies.sim.sim_lamps_requests import lognormal_params

TYPES = {
    "math": ((9e-5, 6e-5), (3.75, 1.3)),
    "qa": ((0.01, 0.005), (2.52, 1.73)),
    "web": ((1.72, 3.33), (2.45, 1.81)),
}
RESPONSE_WORDS = 40
# prompt words: common English words (about 1.3 tokens each, as bench.studies.sim.sim_lamps assumes)
WORDS = [
    "the",
    "people",
    "time",
    "year",
    "day",
    "world",
    "life",
    "hand",
    "part",
    "child",
    "eye",
    "woman",
    "place",
    "work",
    "week",
    "case",
    "point",
    "government",
    "company",
    "number",
    "group",
    "problem",
    "fact",
    "water",
    "house",
    "river",
    "city",
    "music",
    "story",
    "family",
    "school",
    "state",
    "night",
]


def start_web_api() -> tuple[str, Any]:
    """A FastAPI app on a loopback port in a thread: GET /search?q=..&ms=.. answers after `ms`."""
    from fastapi import FastAPI

    api = FastAPI()

    @api.get("/search")
    async def search(q: str, ms: float) -> dict[str, Any]:
        await asyncio.sleep(ms / 1000)
        return {"query": q, "results": [f"result {i} for {q}" for i in range(3)]}

    return serve_in_thread(api)


def web_delay(rng: random.Random) -> float:
    """Seconds, lognormal with ToolBench's mean 1.72 s and std 3.33 s."""
    return rng.lognormvariate(*lognormal_params(*TYPES["web"][0]))


def tool_call(kind: str, rng: random.Random) -> tuple[str, dict[str, Any]]:
    if kind == "math":
        return "calculator", {
            "expression": f"{rng.randint(2, 99)} * {rng.randint(2, 99)} + {rng.randint(1, 9)}"
        }
    topic = rng.choice(
        ["river", "music", "war", "city", "planet", "language", "king", "science", "sport", "island"]
    )
    if kind == "qa":
        return "wikipedia", {"query": topic, "top_k": 1}
    return "web", {"q": topic, "ms": round(1000 * web_delay(rng), 1)}


def result_text(result: Any) -> str:
    return " ".join(str(result).split()[:RESPONSE_WORDS])
