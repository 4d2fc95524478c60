"""A non-LLM engine's op costs (engines.machine.op_costs): fitted at start by a short probe through
its own `execute`, read from a named profile, or none; reported in `EngineProfile.op_costs` and
carried to compilation as `EngineInfo.op_costs`."""

import asyncio

import pytest

from engines.llm_text.costs import FITTED
from engines.machine.op_costs import (
    PROBE_SIZES,
    SAMPLE_SALT,
    WARM_UP_SIZES,
    OpCost,
    check_op_costs_option,
    engine_op_costs,
    fit_op_cost,
    probe_op_cost,
    probe_words,
    profile_op_table,
    request_chars,
)
from engines.protocol import EngineProfile
from teola import Engine, PrimOp
from teola.api.engine_costs import adopt_engine_costs
from teola.sim.virtual_loop import run_virtual

CPU = "cpu-smollm2-135m"


def test_the_fit_of_samples_on_a_line_is_that_line_with_no_error():
    # 10 ms a request, 2 ms an item: 12, 14, 18, 26 ms for 1, 2, 4, 8 items
    cost = fit_op_cost([(1, 0.012), (2, 0.014), (4, 0.018), (8, 0.026)], probe_s=0.2)
    assert cost.base_s == pytest.approx(0.010) and cost.item_s == pytest.approx(0.002)
    assert cost.source == FITTED and cost.error == 0.0 and cost.probe_s == 0.2


def test_the_fit_keeps_its_mean_relative_error():
    # the line through the two samples of 1 item (12 ms) and 8 items (26 ms) is 10 + 2 n ms; a third
    # sample of 4 items at 27 ms (line: 18 ms) is off by a third, unless the fit moves off the others
    cost = fit_op_cost([(1, 0.012), (8, 0.026), (4, 0.027)], probe_s=0.1)
    assert cost.error > 0.05 and cost.base_s > 0 and cost.item_s > 0
    line = [abs(cost.base_s + cost.item_s * n - t) / t for n, t in [(1, 0.012), (8, 0.026), (4, 0.027)]]
    assert cost.error == pytest.approx(sum(line) / 3, abs=1e-4)


def test_the_probe_warms_up_then_fits_the_fastest_batch_of_each_size():
    seen: list[tuple[int, str]] = []

    async def run(n: int, salt: str) -> None:  # an engine of 5 ms a request and 1 ms an item
        seen.append((n, salt))
        slowed = 0.050 if len(seen) == len(WARM_UP_SIZES) + 1 else 0.0  # the first timed batch
        await asyncio.sleep(0.005 + 0.001 * n + slowed)

    cost = run_virtual(probe_op_cost(run))
    assert [n for n, _ in seen] == [*WARM_UP_SIZES, *PROBE_SIZES] and len({s for _, s in seen}) == len(seen)
    assert cost.base_s == pytest.approx(0.005, rel=0.01) and cost.item_s == pytest.approx(0.001, rel=0.01)
    assert cost.error < 0.01  # the slowed batch of 1 had a faster twin
    batches = len(WARM_UP_SIZES) + len(PROBE_SIZES)
    items = sum(WARM_UP_SIZES) + sum(PROBE_SIZES)
    assert cost.probe_s == pytest.approx(0.005 * batches + 0.001 * items + 0.050, rel=0.01)  # 0.16 s


def test_the_option_names_its_values_as_the_llm_costs_option_does():
    ops = frozenset({PrimOp.EMBEDDING})
    assert check_op_costs_option("emb", "sentence_transformers", ops, True) is True
    assert check_op_costs_option("emb", "sentence_transformers", ops, False) is False
    assert check_op_costs_option("emb", "sentence_transformers", ops, CPU) == CPU
    with pytest.raises(ValueError, match="option costs: profile 'cpu-smollm2-135m' gives no op costs"):
        check_op_costs_option("s", "search", frozenset({PrimOp.SEARCHING}), CPU)  # no text search in it
    with pytest.raises(ValueError, match="option costs must be true, false or a profile name"):
        check_op_costs_option("emb", "sentence_transformers", ops, 3)


def test_a_named_profile_is_reported_instead_and_false_reports_none():
    async def never(n: int, salt: str) -> None:
        raise AssertionError("a profile or false runs no probe")

    runs = {"ingestion": never, "searching": never}
    named = run_virtual(engine_op_costs("db", "pgvector", CPU, runs))
    table = profile_op_table(CPU, "pgvector")
    assert named == {op: table[op].as_dict() for op in runs}
    assert named["searching"]["source"] == CPU and named["searching"]["base_s"] > 0
    assert run_virtual(engine_op_costs("db", "pgvector", False, runs)) == {}
    assert profile_op_table("no-such-profile", "pgvector") == {}


class _Started:
    def __init__(self, op_costs: dict) -> None:
        self.profile = EngineProfile(op_costs=op_costs)


class _Runtime:
    def __init__(self, instances: dict) -> None:
        self.instances = instances


def test_a_started_engines_reported_op_costs_reach_compilation_keyed_by_op():
    spec = Engine("emb", kind="sentence_transformers")
    assert spec.info().op_costs == {}
    cost = OpCost(base_s=0.01, item_s=0.002, source=FITTED, error=0.03, probe_s=0.2)
    runtime = _Runtime({"emb": [_Started({"embedding": cost.as_dict()})]})
    assert adopt_engine_costs({"emb": spec}, runtime)  # type: ignore[arg-type]
    assert spec.info().op_costs == {PrimOp.EMBEDDING: cost} and spec.costs is None
    assert not adopt_engine_costs({"emb": spec}, runtime)  # type: ignore[arg-type]  # unchanged


def test_an_engine_info_with_op_costs_is_hashable_and_equal_only_to_the_same_costs():
    spec = Engine("emb", kind="sentence_transformers")
    plain = spec.info()
    spec.op_costs = {PrimOp.EMBEDDING: OpCost(base_s=0.01, item_s=0.002, source=FITTED)}
    costed = spec.info()
    assert hash(costed) == hash(plain) and costed != plain and costed == spec.info()


def test_the_probe_records_its_items_characters_and_an_items_seconds_scale_with_them():
    async def run(n: int, salt: str) -> None:
        await asyncio.sleep(0.005 + 0.001 * n)

    fitted = run_virtual(
        engine_op_costs(
            "emb", "sentence_transformers", True, {"embedding": run}, item_chars={"embedding": 80.0}
        )
    )
    cost = OpCost.from_dict(fitted["embedding"])
    assert cost.item_chars == 80.0 and cost.item_s == pytest.approx(0.001, rel=0.01)
    assert cost.item_seconds(800) == pytest.approx(10 * cost.item_s)  # ten probe items' text
    assert cost.item_seconds(0) == cost.item_s  # unknown length: one item
    unmeasured = OpCost(base_s=0.0, item_s=0.002, source=FITTED)
    assert unmeasured.item_seconds(5000) == 0.002
    assert request_chars({"query": "abc", "text": "de", "top_k": 3}) == 5
    # a probe item as the sentence-transformers engines measure it: the salt as long as the probe's
    assert request_chars({"text": probe_words(0, SAMPLE_SALT)}) == len(probe_words(3, "probe 0a1b2c3d 7"))
