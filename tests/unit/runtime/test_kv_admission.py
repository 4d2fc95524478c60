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

