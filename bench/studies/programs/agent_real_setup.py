"""The set-up of the ReAct agent study on real engines (bench/studies/programs/agent_real.py): the model,
the admission budget, the tools and their expected durations, the systems compared and the questions."""

from __future__ import annotations

import random

MODEL = "smollm2-135m-instruct"
CAP = 8
WEB_MEAN_STD = (1.72, 3.33)
API_MEANS = {
    "calculator": 1e-4,
    "wikipedia": 0.01,
    "web": 1.72,
    "tool": 0.58,
}  # "tool": the mean of the three
TOPICS = ["rivers", "music", "football", "elections", "space travel", "the economy", "climate", "films"]
SYSTEMS = {"FCFS+INFERCEPT": "fcfs", "SJF": "sjf", "LAMPS": "lamps"}
TOOLS = ("calculator", "wikipedia", "web")


def questions(n: int, seed: int) -> list[str]:
    """`n` questions, kinds in turn (arithmetic, a fact, news), drawn with `seed`."""
    from engines.assets.corpora import load_wiki_summaries

    rng = random.Random(seed)
    titles = [r["title"] for r in load_wiki_summaries(n=400)]
    out = []
    for i in range(n):
        kind = i % 3
        if kind == 0:
            out.append(f"What is {rng.randint(12, 99)} times {rng.randint(12, 99)}?")
        elif kind == 1:
            out.append(f"What is {rng.choice(titles)}?")
        else:
            out.append(f"Search the web for today's news about {rng.choice(TOPICS)}.")
    return out
