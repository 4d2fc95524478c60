"""Simulated engines sharing one machine (engines/sim/device.py) and `teola profile`'s measurement
of how much they slow each other (teola/sim/contention.py), on the virtual clock."""

import asyncio

import pytest

from engines.sim.device import DeviceShare
from engines.sim.llm import SimLLM
from engines.sim.sim_engine import SimEngine
from teola.sim.virtual_loop import run_virtual

DEVICE = {
    "exclusive": ["sentence_transformers", "reranker"],
    "slowdown": {"vllm": {"sentence_transformers": 1.5}, "sentence_transformers": {"vllm": 1.2}},
}
COST = {"base": 0.02, "prefill_token": 1e-4, "decode_seq": 0.01, "context_token": 0.0}


def _embedder(name: str, kind: str, seconds: float, device=DEVICE) -> SimEngine:
    op = "embedding" if kind == "sentence_transformers" else "reranking"
    return SimEngine(
        name,
        [op],
        latency={1: seconds, 64: seconds},
        record=False,
        device=DeviceShare.from_profile(kind, device),
    )


def test_exclusive_kinds_take_turns_and_others_do_not():
    async def main():
        emb, rr = _embedder("e", "sentence_transformers", 1.0), _embedder("r", "reranker", 1.0)
        free = _embedder("f", "sentence_transformers", 1.0, device=None)
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        await asyncio.gather(
            emb.execute("embedding", [{"text": "a"}]), rr.execute("reranking", [{"query": "q", "text": "a"}])
        )
        turns = loop.time() - t0
        t0 = loop.time()
        await asyncio.gather(
            free.execute("embedding", [{"text": "a"}]), rr.execute("reranking", [{"query": "q", "text": "a"}])
        )
        return turns, loop.time() - t0

    turns, together = run_virtual(main())
    assert turns == pytest.approx(2.0) and together == pytest.approx(1.0)


def test_an_op_is_slowed_only_while_another_kind_computes_and_simulations_do_not_share_state():
    async def main():
        llm = SimLLM("llm", COST, max_num_seqs=4, device=DeviceShare.from_profile("vllm", DEVICE))
        emb = _embedder("e", "sentence_transformers", 2.0)
        await llm.start()
        req = {"parts": [["question", "hello there"]], "max_tokens": 10, "ignore_eos": True}
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        await llm.execute("decoding", [req])
        alone = loop.time() - t0
        t0 = loop.time()
        busy = asyncio.ensure_future(emb.execute("embedding", [{"text": "a"}]))
        await asyncio.sleep(0)
        await llm.execute("decoding", [dict(req, parts=[["question", "other words"]])])
        loaded = loop.time() - t0
        await busy
        await llm.stop()
        return alone, loaded, emb.busy_s

    alone, loaded, emb_busy = run_virtual(main())
    assert loaded == pytest.approx(alone * 1.5, rel=0.02)  # every iteration ran under the 2 s batch
    assert emb_busy == pytest.approx(2.0)  # it started with the LLM idle: not slowed
    alone2, _, _ = run_virtual(main())  # a new loop starts with nothing busy
    assert alone2 == pytest.approx(alone)


def test_a_device_entry_names_what_is_wrong():
    assert DeviceShare.from_profile("vllm", None) is None
    assert DeviceShare.from_profile("pgvector", DEVICE) is None  # neither exclusive nor slowed
    assert DeviceShare.from_profile("vllm", DEVICE).slowdown == (("sentence_transformers", 1.5),)
    only_slows = DeviceShare.from_profile("vllm", {"slowdown": {"reranker": {"vllm": 1.1}}})
    assert only_slows is not None and only_slows.slowdown == ()  # it must still count as busy
    with pytest.raises(ValueError, match="device.slowdown.vllm.reranker"):
        DeviceShare.from_profile("vllm", {"slowdown": {"vllm": {"reranker": 0.5}}})
    with pytest.raises(ValueError, match="device.exclusive"):
        DeviceShare.from_profile("vllm", {"exclusive": "reranker"})


def test_profiling_sim_engines_with_known_contention_recovers_it():
    from teola.sim.contention import profile_contention
    from teola.sim.profile_batches import prose as _prose

    async def main():
        llm = SimLLM("llm", COST, max_num_seqs=4, device=DeviceShare.from_profile("vllm", DEVICE))
        emb = SimEngine(
            "e",
            ["embedding"],
            op_cost={"embedding": {"base": 0.05, "per_item": 0.1}},
            record=False,
            device=DeviceShare.from_profile("sentence_transformers", DEVICE),
        )
        emb.exclusive = True
        await llm.start()
        try:
            return await profile_contention(
                {"vllm": llm, "sentence_transformers": emb}, _prose, lambda _: None
            )
        finally:
            await llm.stop()

    device = run_virtual(main())
    assert device["exclusive"] == ["sentence_transformers"]
    assert device["slowdown"]["vllm"]["sentence_transformers"] == pytest.approx(1.5, rel=0.02)
    assert device["slowdown"]["sentence_transformers"]["vllm"] == pytest.approx(1.2, rel=0.02)
    assert run_virtual(_no_pair()) is None


async def _no_pair():
    from teola.sim.contention import profile_contention

    return await profile_contention({"vllm": object()}, lambda w, s: "x", lambda _: None)


def test_an_llm_that_is_not_slowed_still_slows_the_embedder():
    device = {"slowdown": {"sentence_transformers": {"vllm": 1.25}}}

    async def main():
        llm = SimLLM("llm", COST, max_num_seqs=4, device=DeviceShare.from_profile("vllm", device))
        emb = _embedder("e", "sentence_transformers", 1.0, device=device)
        await llm.start()
        req = {"parts": [["question", "hello there"]], "max_tokens": 200, "ignore_eos": True}
        decoding = asyncio.ensure_future(llm.execute("decoding", [req]))
        await asyncio.sleep(0.5)
        await emb.execute("embedding", [{"text": "a"}])
        await decoding
        await llm.stop()
        return emb.busy_s

    assert run_virtual(main()) == pytest.approx(1.25)
