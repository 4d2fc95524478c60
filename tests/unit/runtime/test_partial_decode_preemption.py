"""issue 62: a partial decode (decode pipelining: items go downstream as they are parsed) is a
preemptible call like a decoding entry. On the virtual clock with an ItemDecoder of 1-second steps
(tests/support/item_decoder.py: item j of the output is "item<j> whole", 4 tokens a line, token k
out at t = k + 1 while the call runs), so every time below is exact."""

from __future__ import annotations

import asyncio

import pytest

from teola.ir.engine_spec import Engine
from teola.runtime import Runtime
from teola.sim.virtual_loop import run_virtual
from tests.support.borrowed import Borrowed
from tests.support.entry_work import RecordedWork, decoding_entry
from tests.support.item_decoder import ItemDecoder, item, piece


def run(max_items: int | None, preempt: bool = True) -> tuple[Runtime, Borrowed, RecordedWork, RecordedWork]:
    """`bulk`, a partial decode of a 4-item list (16 tokens), at t=0; `urgent`, a 3-token decode,
    at t=5.5, on an engine that holds 1 request (mlfq, 4-token quantum)."""

    async def main():
        lent = Borrowed(ItemDecoder("llm", step=1.0, max_batch=1, max_efficient_batch=1))
        await lent.engine.start()
        rt = Runtime(
            {"llm": Engine("llm", kind="vllm", model="m", max_efficient_batch=1)},
            {"llm": lent},
            policy="mlfq",
            policy_options={"mlfq": {"base_quantum": 4, "beta": None, "rerank_every": 1, "preempt": preempt}},
        )
        await rt.start()
        try:
            sched = rt.schedulers["llm"]
            request = {"parts": [["question", "list things"]], "max_tokens": 16, "split": "list"}
            if max_items is not None:
                request["max_items"] = max_items
            bulk, bulk_work = decoding_entry("bulk", [request], 0.0, op="partial_decoding")
            sched.submit(bulk)
            await asyncio.sleep(5.5)
            urgent, urgent_work = decoding_entry(
                "urgent", [{"parts": [["question", "one line"]], "max_tokens": 3}], 5.5
            )
            sched.submit(urgent)
            await asyncio.gather(bulk_work.done.wait(), urgent_work.done.wait())
        finally:
            await rt.stop()
        return rt, lent, bulk_work, urgent_work

    return run_virtual(main())


def test_a_partial_decode_preempted_mid_item_emits_each_item_once_whole_and_in_order():
    """item0 is out at t=4. By t=5 bulk decoded 5 tokens (past its quantum: demoted); urgent comes
    at 5.5 and preempts it: the abort lands at t=6 with "- item0 whole\\n- item1" out, and the engine
    cuts that last line as an item ("item1"), which must not go downstream. urgent runs t=6..9;
    bulk resumes at 9 from token 5 and its own parser finds item1 whole at 12 (token 7), item2 at
    16, item3 at 20, when it ends."""
    rt, lent, bulk, urgent = run(max_items=None)
    assert bulk.items == [(4.0, item(0)), (12.0, item(1)), (16.0, item(2)), (20.0, item(3))]
    assert urgent.done_at == 9.0 and bulk.done_at == 20.0
    assert bulk.starts == [(0.0, 1), (9.0, 1)] and bulk.requeues == [6.0]
    final = bulk.out[0]
    assert final["text"] == "".join(piece(k) for k in range(16))
    assert final["items"] == [item(j) for j in range(4)] and final["preemptions"] == 1
    assert final["resumed_at"] == [5] and "aborted" not in final
    assert rt.metrics.preemptions == 1 and lent.engine.aborted == ["llm:call0"]
    runs = [r for r in lent.requests if "list things" in str(r["parts"])]
    assert [r.get("resume_ids") for r in runs] == [None, [0, 1, 2, 3, 4]]
    assert [r["max_tokens"] for r in runs] == [16, 11]
    assert runs[1]["stream_text"] is True and "max_items" not in runs[1]  # the runtime parses its text


def test_a_preempted_partial_decode_stops_at_max_items():
    """max_items=3: the resumed run asks the engine for the 2 items the first run's output did not
    complete (the engine's own parser does not count the cut line's end "whole": it goes on to
    item3, one more than needed, its `max_items` reached at token 15); downstream gets exactly 3."""
    _, lent, bulk, _ = run(max_items=3)
    assert bulk.items == [(4.0, item(0)), (12.0, item(1)), (16.0, item(2))]
    assert bulk.out[0]["items"] == [item(j) for j in range(3)]
    runs = [r for r in lent.requests if "list things" in str(r["parts"])]
    assert [r.get("max_items") for r in runs] == [3, 2]


@pytest.mark.parametrize("preempt", [True, False])
def test_the_items_do_not_depend_on_preemption(preempt):
    """The control: without preemption bulk runs to its end beside urgent (t=16), with the items at
    4, 8, 12, 16; preempted, the same items come, each once, in the same order."""
    rt, _, bulk, _ = run(max_items=None, preempt=preempt)
    assert [text for _, text in bulk.items] == [item(j) for j in range(4)]
    assert [t for t, _ in bulk.items] == ([4.0, 12.0, 16.0, 20.0] if preempt else [4.0, 8.0, 12.0, 16.0])
    assert rt.metrics.preemptions == (1 if preempt else 0)


def test_a_query_whose_pipelined_decode_is_preempted_gets_each_item_once():
    """The same schedule through the graph scheduler: a splittable LLM component (its prefill fused
    into the stream of 4 partial decodes) is preempted at t=6 and resumes at 9; each partial
    decode finishes once, with its whole item, when the item is out (4, 12, 16, 20), and the text
    the runtime asked the resumed run to stream does not reach the query's listener."""
    from teola import App, Node

    async def main():
        app = App("pipelined")
        app.register_engine(Engine("llm", kind="vllm", model="m"), backend=ItemDecoder("llm"))
        app.update_template(
            [
                Node(
                    "llm",
                    name="ex",
                    engine="llm",
                    anno="splittable",
                    config={"parts": [["q", "$query.question"]], "max_tokens": 16, "split": "list"},
                )
            ]
        )
        compiled = app.compile({"question": "list things"})
        engine = ItemDecoder("llm", step=1.0, max_batch=1, max_efficient_batch=1)
        rt = Runtime(
            {"llm": Engine("llm", kind="vllm", model="m", max_efficient_batch=1)},
            {"llm": engine},
            policy="mlfq",
            policy_options={"mlfq": {"base_quantum": 4, "beta": None, "rerank_every": 1}},
        )
        await rt.start()
        events: list[dict] = []
        try:
            query = asyncio.ensure_future(rt.submit(compiled, {}, on_event=events.append))
            await asyncio.sleep(5.5)
            urgent, _ = decoding_entry(
                "urgent", [{"parts": [["question", "one line"]], "max_tokens": 3}], 5.5
            )
            rt.schedulers["llm"].submit(urgent)
            return await query, rt.metrics.preemptions, events
        finally:
            await rt.stop()

    result, preemptions, events = run_virtual(main())
    assert result.output == [item(j) for j in range(4)] and preemptions == 1
    decodes = [t for t in result.trace if t["op"] == "partial_decoding"]
    assert [(t["primitive"], t["finished"], t["batches"]) for t in decodes] == [
        (f"ex.call.decode[{j}]", at, 2) for j, at in enumerate([4.0, 12.0, 16.0, 20.0])
    ]
    assert not [e for e in events if e["event"] == "token"]
