"""The shipped ReAct agent (apps/react_agent.py: one LLM call that pauses for tools, the template
component "agent") under LAMPS vs FCFS + INFERCEPT vs SJF on the real engines, Poisson arrivals
(issue 18). Unlike bench.studies.programs.lamps_real, nothing is forced but the first action's opening (the
app's `start`): the model writes its tool calls, the tools run for real, and the answer is whatever it writes.

    python -m bench agent_real [--requests 24] [--rates 0.5,1.0] [--trials 3] [--train 48] [--quick]

Questions (fixed seeds; a third of each kind): arithmetic ("What is 37 times 12?"), facts about a
title of the shipped Wikipedia corpus, and news ("Search the web for today's news about ...").
Tools, all real, on teola's tool engine: the calculator (in process), the Wikipedia lookup (PostgreSQL
full-text search over the shipped corpus) and "web", an HTTP tool on loopback whose server answers
after a delay drawn from ToolBench's API durations (mean 1.72 s, std 3.33 s, lognormal with those
moments, LAMPS Table 2), seeded by the query text so every system sees the same delay for the same call.
The model chooses the tool; the tables count what it called.

Every segment's handling is "auto" (teola.scheduling.program.pause_handling: INFERCEPT's least waste, chosen
when the segment is queued). Predicted lengths: before the runs, `--train` other questions run alone under
FCFS; every segment's prompt text (question + what the call wrote so far) and its output tokens train
teola.scheduling.program.length_predictor.LengthPredictor over MiniLM embeddings, which then predicts every
segment of every run (Runtime option "length_predictor"); its MAE on the runs' segments is reported.
Systems, one vLLM instance with the same admission budget (CAP calls) for each: FCFS + INFERCEPT
(policy fcfs), SJF by predicted length (sjf), LAMPS (lamps, its own costs and per-tool means seeded
with the tools' expected durations). Reported per point: mean and p99 end-to-end latency, mean and p99
time to the first action (the first segment's end: the tool call the model chose), trial spread.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import time
from typing import Any

import bench.studies.programs.agent_real_page as agent_real_page
from bench.lib.results import percentile, serve_in_thread, write_results
from bench.studies.programs.agent_real_setup import (
    API_MEANS,
    CAP,
    MODEL,
    SYSTEMS,
    TOOLS,
    WEB_MEAN_STD,
    questions,
)
from bench.studies.sim.sim_lamps_requests import lognormal_params


def start_web_api() -> tuple[str, Any]:
    """A FastAPI app on a loopback port in a thread: GET /search?query=.. answers after a delay drawn
    from ToolBench's API durations, seeded by the query."""
    from fastapi import FastAPI

    api = FastAPI()

    @api.get("/search")
    async def search(query: str = "") -> dict[str, Any]:
        await asyncio.sleep(random.Random(query).lognormvariate(*lognormal_params(*WEB_MEAN_STD)))
        return {"query": query, "results": [f"Headline {i} about {query}" for i in range(3)]}

    return serve_in_thread(api)


class Segments:
    """The Runtime's length predictor: records every agent segment's prompt text (with its handling)
    and, once `fit` has run, predicts its output tokens from the text's MiniLM embedding."""

    def __init__(self, encoder: Any) -> None:
        self.encoder = encoder
        self.model: Any = None
        self.seen: dict[str, list[dict[str, Any]]] = {}  # kv_key -> its segments in order

    def __call__(self, req: dict[str, Any]) -> int | None:
        key = req.get("kv_key")
        if key is None:
            return None
        text = req["parts"][-1][1] + "\n" + "".join(str(c) for c in req.get("continuation") or [])
        pred = None if self.model is None else int(self.model.predict(self.encoder.encode([text]))[0])
        self.seen.setdefault(key, []).append({"text": text, "predicted": pred})
        return pred

    def outputs(self, qid: str, trace: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """This query's segments with their output tokens and the handling their pause got ("auto"
        resolved when queued; None for the last), from its trace rows, in segment order."""
        segs = self.seen.get(f"{qid}/agent", [])
        # a prefill fused into its decode has a row of its own repeating the decode's tokens
        done = sorted(
            (
                t
                for t in trace
                if t["primitive"].startswith("agent.seg")
                and t.get("num_output_tokens")
                and "fused_into" not in t
            ),
            key=lambda t: t["primitive"],
        )
        for s, t in zip(segs, done):
            s["output_tokens"] = int(t["num_output_tokens"])
            s["handling"] = t.get("pause_kv")
        return [s for s in segs if "output_tokens" in s]

    def fit(self, rows: list[dict[str, Any]]) -> None:
        from teola.scheduling.program.length_predictor import LengthPredictor

        self.model = LengthPredictor().fit(
            self.encoder.encode([r["text"] for r in rows]), [r["output_tokens"] for r in rows]
        )


def tools_called(segs: list[dict[str, Any]]) -> list[str]:
    """The tools the call asked for: the last tool call in each continuation's text."""
    from teola.compile.tool_syntax import parse_tool_call

    names = []
    for s in segs[1:]:
        call = parse_tool_call(s["text"].rsplit("</tool>", 1)[0])  # the call's text stops before </tool>
        names.append(call.name if call is not None and call.error is None else "bad call")
    return names


async def one(app: Any, segments: Segments, question: str, at: float, start: float) -> dict[str, Any]:
    loop = asyncio.get_running_loop()
    await asyncio.sleep(max(0.0, start + at - loop.time()))
    t0 = loop.time()
    first: list[float] = []

    def on_event(ev: dict[str, Any]) -> None:
        if (
            ev.get("event") == "primitive"
            and ev.get("status") == "finished"
            and ev["primitive"] == "agent.seg0.decode"
        ):
            first.append(loop.time())

    compiled = app.compile({"question": question})
    res = await app.execute(compiled, None, on_event)
    segs = segments.outputs(compiled.query_id, res.trace)
    return {
        "latency": loop.time() - t0,
        "first_action": (first[0] if first else loop.time()) - t0,
        "segments": segs,
        "tools": tools_called(segs),
        "answer": str(res.output)[:200],
    }


def lamps_costs() -> tuple[dict[str, Any], float, float]:
    """LAMPS' options from the shipped CPU profile (its iteration step at CAP calls, prefill and swap
    seconds per token, the tools' expected durations), and those prefill and swap costs."""
    from engines.sim.profile import load_profile

    cost = load_profile("cpu-smollm2-135m")["engines"]["vllm"]
    block = int(cost.get("block_size", 32))
    fwd, swap = cost["cost"]["prefill_token"], float(cost.get("swap_seconds_per_block", 0.0)) / block
    lamps = {
        "step_s": cost["cost"]["base"] + CAP * cost["cost"]["decode_seq"],
        "fwd_s_per_token": fwd,
        "swap_s_per_token": swap,
        "api_defaults": API_MEANS,
        "batch_size": CAP,
    }
    return lamps, fwd, swap


async def run_rates(
    app: Any, llm: Any, segments: Segments, rates: list[float], n: int, trials: int
) -> list[dict[str, Any]]:
    """Each rate's trace (questions and arrivals seeded by the rate) `trials` times under each system,
    the prefix cache emptied before each: one summary row per rate, trial and system."""
    from bench.lib.workloads import poisson_arrivals

    rows = []
    for rate in rates:
        qs, arrivals = questions(n, seed=int(rate * 1000)), poisson_arrivals(n, rate, seed=int(rate * 1000))
        for trial in range(trials):
            for system, policy in SYSTEMS.items():
                app.runtime.set_policy(policy)
                await llm.reset_prefix_cache()
                start = asyncio.get_running_loop().time()
                done = await asyncio.gather(
                    *(one(app, segments, q, at, start) for q, at in zip(qs, arrivals))
                )
                rows.append(summary(rate, trial, system, done))
                r = rows[-1]
                print(
                    f"[agent_real] {rate:g}/s trial {trial} {system}: mean {r['mean_s']:.2f} s p99 "
                    f"{r['p99_s']:.2f} s first action {r['first_mean_s']:.2f} s",
                    file=sys.stderr,
                    flush=True,
                )
    return rows


async def run_all(rates: list[float], n: int, trials: int, n_train: int) -> dict[str, Any]:
    from apps.react_agent import build
    from engines.assets.paths import configure_engine_env
    from engines.sentence_transformers.embedding import EmbeddingEngine
    from engines.tools.tool_engine import ToolEngine
    from engines.vllm.engine import VLLMEngine
    from teola import Engine

    configure_engine_env()
    lamps, fwd, swap = lamps_costs()
    url, server = start_web_api()
    encoder = EmbeddingEngine("embedding", model="all-minilm-l6-v2")
    await encoder.start()
    segments = Segments(encoder._require_model())
    llm = VLLMEngine("llm", model=MODEL, max_num_seqs=16, kv_swap=True)
    tools = ToolEngine(
        "tools",
        wikipedia=True,
        timeout=60,
        http_tools=[
            {"name": "web", "url": url + "/search?query={query}", "timeout": 60, "description": "web search"}
        ],
    )
    app = build(tool_names=TOOLS, handling="auto", max_rounds=2)
    app.register_engine(
        Engine(
            "llm",
            kind="vllm",
            model=MODEL,
            max_efficient_batch=CAP,
            max_batch=16,
            admission="efficient_batch",
        ),
        backend=llm,
    )
    app.register_engine(Engine("tools", kind="tool"), backend=tools)
    await app.start(
        policy="fcfs",
        policy_options={"lamps": lamps},
        length_predictor=segments,
        pause_costs={"fwd_s_per_token": fwd, "swap_s_per_token": swap, "api_defaults": API_MEANS},
    )
    try:
        train = await train_predictor(app, segments, n_train)
        rows = await run_rates(app, llm, segments, rates, n, trials)
    finally:
        await app.stop()
        await encoder.stop()
        server.should_exit = True
    return {"rows": rows, "train": train, "requests": n, "trials": trials, "cap": CAP}


async def train_predictor(app: Any, segments: Segments, n: int) -> dict[str, Any]:
    """Run `n` training questions alone (policy fcfs), fit the predictor on their segments."""
    t0 = time.perf_counter()
    rows = []
    for i, q in enumerate(questions(n, seed=99)):
        compiled = app.compile({"question": q})
        res = await app.execute(compiled)
        rows += segments.outputs(compiled.query_id, res.trace)
        if i % 12 == 11:
            print(f"[agent_real] training run {i + 1}/{n}", file=sys.stderr, flush=True)
    segments.fit(rows)
    lengths = [r["output_tokens"] for r in rows]
    return {
        "questions": n,
        "segments": len(rows),
        "mean_tokens": statistics.fmean(lengths),
        "alone_s": (time.perf_counter() - t0) / max(1, n),
    }


def summary(rate: float, trial: int, system: str, done: list[dict[str, Any]]) -> dict[str, Any]:
    lat, first = [d["latency"] for d in done], [d["first_action"] for d in done]
    segs = [s for d in done for s in d["segments"]]
    errs = [abs(s["predicted"] - s["output_tokens"]) for s in segs if s.get("predicted") is not None]
    tools = [t for d in done for t in d["tools"]]
    return {
        "rate": rate,
        "trial": trial,
        "system": system,
        "mean_s": statistics.fmean(lat),
        "p99_s": percentile(lat, 99),
        "first_mean_s": statistics.fmean(first),
        "first_p99_s": percentile(first, 99),
        "segments": len(segs),
        "decode_tokens": sum(s["output_tokens"] for s in segs),
        "mae": statistics.fmean(errs) if errs else None,
        "handlings": {h: sum(1 for s in segs if s["handling"] == h) for h in ("preserve", "discard", "swap")},
        "tools": {t: tools.count(t) for t in sorted(set(tools))},
        "answers": [d["answer"] for d in done[:3]],
        "per_question": [
            {
                "latency": round(d["latency"], 3),
                "tools": d["tools"],
                "tokens": [s["output_tokens"] for s in d["segments"]],
            }
            for d in done
        ],
    }


def markdown(data: dict[str, Any]) -> str:
    """The page of a run, its set-up described by this study's docstring."""
    return agent_real_page.markdown(data, __doc__ or "")


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of `python -m bench agent_real`."""
    p.add_argument("--requests", type=int, default=24)
    p.add_argument("--rates", default="0.5,1.0")
    p.add_argument("--trials", type=int, default=3)
    p.add_argument("--train", type=int, default=48, help="questions run alone to train the length predictor")
    p.add_argument(
        "--quick", action="store_true", help="6 questions, one rate, one trial, 12 training questions"
    )
    p.add_argument("--out", default="agent_real")


def run_cli(args: argparse.Namespace, argv: list[str], p: argparse.ArgumentParser) -> int:
    """Runs `python -m bench agent_real` (argv: the options given, for its page)."""
    import os

    rates = [0.5] if args.quick else [float(x) for x in args.rates.split(",")]
    n, trials, n_train = (6, 1, 12) if args.quick else (args.requests, args.trials, args.train)
    if n < 1 or trials < 1 or n_train < 3 or min(rates) <= 0:
        p.error("--requests and --trials must be >= 1, --train >= 3, rates positive")
    t0 = time.perf_counter()
    data = asyncio.run(run_all(rates, n, trials, n_train))
    data.update(
        wall_s=time.perf_counter() - t0,
        load=os.getloadavg()[0],
        command="python -m bench agent_real " + " ".join(argv),
    )
    write_results(
        args.out if not args.quick else "quick/" + args.out, data, markdown(data), subject="programs"
    )
    return 0
