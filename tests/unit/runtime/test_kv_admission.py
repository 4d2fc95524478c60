"""issue 73 item 1: teola admits an LLM engine's calls by its real capacity (max_num_seqs and the
tokens its KV cache holds), read from the engine, so calls wait in teola's queue, where the program
policy orders them, instead of in the engine's."""

from __future__ import annotations

from engines.sim.llm import SimLLM
from teola.ir.engine_spec import Engine
from teola.runtime import Runtime
from teola.sim.virtual_loop import run_virtual

COST = {"base": 0.01, "prefill_token": 0.0, "decode_seq": 0.0, "context_token": 0.0}


def sim_runtime(policy: str = "plas", **engine_kw) -> Runtime:
    engine = SimLLM("llm", COST, token_ratio=1.0, template_tokens=0, **engine_kw)
    return Runtime({"llm": Engine("llm", kind="vllm", model="m")}, {"llm": engine}, policy=policy)


def test_the_simulated_engines_kv_capacity_and_seats_reach_the_preemptor():
    """40 blocks of 16 tokens = 640 tokens, 6 seats: what the Preemptor admits against (before, the
    simulated engine's profile carried no token budget: 0, so teola admitted by seats alone)."""

    async def main():
        rt = sim_runtime(num_blocks=40, block_size=16, max_num_seqs=6)
        await rt.start()
        try:
            pre = rt.schedulers["llm"].preemptor
            return pre.budget, pre.token_budget, rt.schedulers["llm"].token_budget
        finally:
            await rt.stop()

    assert run_virtual(main()) == (6, 640, 640)


async def test_calls_are_admitted_by_the_tokens_they_hold_not_their_whole_output_budget():
    """4 seats, a 40-token budget, 6 calls of prompt "cN" (2 chars // 4 + 1 = 1 token) decoding 12
    tokens each, in equal queues (a 1000-token quantum). Each is charged 1 + 16 (one block of
    headroom) = 17 when admitted: two fit (34), the third (17 > 6 left) waits in teola's queue. As
    they decode the two grow by a token each per step: at 4 tokens each they hold 42 > 40, so the
    newer one is preempted by teola (it resumes later from its 4 tokens). So at most 2 run at once.
    Before, each call was charged 1 + 12 = 13 up front and admitted while the sum stayed under 40,
    plus one past it: 4 ran at once, all 4 seats."""
    import asyncio

    from engines.sim.step_decoder import StepDecoder
    from teola.api.program import Program

    engine = StepDecoder("llm", step=0.005, max_batch=4, max_efficient_batch=4)
    spec = Engine("llm", kind="vllm", model="m", max_efficient_batch=4, token_budget=40)
    rt = Runtime(
        {"llm": spec},
        {"llm": engine},
        policy="plas",
        policy_options={"plas": {"beta": None, "service": "tokens", "base_quantum": 1000, "rerank_every": 1}},
    )
    await rt.start()
    try:
        async with Program(rt, "p") as prog:
            results = await asyncio.gather(
                *(prog.call(f"c{i}", parent_ids=[], max_tokens=12) for i in range(6))
            )
    finally:
        await rt.stop()
    assert [r.result["text"] for r in results] == ["".join(f"t{k} " for k in range(12))] * 6
    assert engine.peak == 2
    assert rt.metrics.preemptions >= 1


async def test_an_engine_with_nothing_to_preempt_with_is_named_once_at_start(caplog):
    """A preemptive policy on an engine without abort: one warning names what it lacks; switching
    the policy again does not repeat it."""
    import logging

    from engines.protocol import Capability
    from engines.sim.step_decoder import StepDecoder

    class NoAbort(StepDecoder):
        capabilities = (Capability.STREAM,)

    rt = Runtime(
        {"llm": Engine("llm", kind="vllm", model="m")}, {"llm": NoAbort("llm", step=0.005)}, policy="plas"
    )
    with caplog.at_level(logging.WARNING, logger="teola.runtime"):
        await rt.start()
        try:
            sched = rt.schedulers["llm"]
            sched.policy = sched.policy
        finally:
            await rt.stop()
    said = [r.getMessage() for r in caplog.records if "preempts running calls" in r.getMessage()]
    assert len(said) == 1 and "no abort" in said[0]


def test_running_calls_are_counted_by_the_engines_kv_report_not_teolas_estimate():
    """6 calls of a 200-character one-word prompt decoding 12 tokens, on a simulated engine with 10
    blocks of 16 tokens (160) and 8 seats. Teola estimates each at 200 // 4 + 1 = 51 + 16 = 67 tokens;
    the engine tokenizes it to 4 (one word + the 3-token assistant turn). Before (estimates only):
    67 + 67 = 134 of 160, the third's 67 > 26 left, so 2 ran at once until one ended. Now each running
    call is charged 4 + decoded + 16 from its first report and the instance the engine's used blocks
    (one per call), so the later calls start while the first ones run: all 6 at once at the peak,
    and the engine never preempts (its pool is never short: 6 calls x 1 block)."""
    import asyncio

    from teola.api.program import Program

    class Peak(SimLLM):
        peak = 0

        async def _iteration(self) -> None:
            self.peak = max(self.peak, len(self.running))
            await super()._iteration()

    async def main():
        engine = Peak(
            "llm", COST, token_ratio=1.0, template_tokens=0, num_blocks=10, block_size=16, max_num_seqs=8
        )
        rt = Runtime(
            {"llm": Engine("llm", kind="vllm", model="m")},
            {"llm": engine},
            policy="plas",
            policy_options={
                "plas": {"beta": None, "service": "tokens", "base_quantum": 1000, "rerank_every": 1}
            },
        )
        await rt.start()
        try:
            async with Program(rt, "p") as prog:
                results = await asyncio.gather(
                    *(prog.call(f"{i}" + "x" * 199, parent_ids=[], max_tokens=12) for i in range(6))
                )
        finally:
            await rt.stop()
        return engine, rt, results

    engine, rt, results = run_virtual(main())
    assert [r.result["num_prompt_tokens"] for r in results] == [4] * 6
    assert engine.peak == 6
    assert engine.stats["preemptions"] == 0 and rt.metrics.preemptions == 0


def test_the_batch_fill_charges_each_request_the_engines_block_once_reported():
    """Waiting calls are charged their prompt + a 16-token headroom (teola's estimate of a block);
    once the engine reports 64-token blocks, each request the batch fill admits takes 48 more
    (Limits.headroom), as the Preemptor's room already counted."""
    from teola.api.program import Program

    async def main():
        rt = sim_runtime(num_blocks=40, block_size=64, max_num_seqs=6)
        await rt.start()
        try:
            sched = rt.schedulers["llm"]
            inst = sched.instances[0]
            before = sched._limits(inst).headroom
            async with Program(rt, "p") as prog:
                await prog.call("hello", parent_ids=[], max_tokens=4)
            return before, sched._limits(inst).headroom, sched.preemptor.ledger(inst).block
        finally:
            await rt.stop()

    assert run_virtual(main()) == (0, 48, 64)
