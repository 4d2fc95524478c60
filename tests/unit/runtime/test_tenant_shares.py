"""Fair queuing between tenants (teola.runtime.engine_tier.tenant_shares): the share, not arrival
order, decides which tenant's entries wait when an engine is saturated; one tenant alone is
scheduled exactly as before."""

from __future__ import annotations

import asyncio

import pytest

from engines.sim.step_decoder import StepDecoder
from teola.ir.engine_spec import Engine
from teola.runtime import Runtime
from teola.runtime.engine_tier.tenant_shares import TenantShares
from teola.scheduling.base import Pending, RequestQueue
from teola.sim.virtual_loop import run_virtual


def pending(tenant: str, name: str, t: float = 0.0, n: int = 1) -> Pending:
    return Pending(
        query_id=f"q-{name}",
        name=name,
        op="decoding",
        depth=0,
        arrival=t,
        requests=[{} for _ in range(n)],
        tenant=tenant,
    )


def test_one_tenant_is_never_filtered():
    shares = TenantShares(quantum=2)
    q = RequestQueue([pending("a", f"e{i}", i) for i in range(5)])
    shares.served([(pending("a", "x"), 100)])
    assert shares.view(q) is None


def test_a_tenant_far_ahead_waits_for_the_others():
    shares = TenantShares(quantum=4)
    flood = [pending("flood", f"f{i}", i) for i in range(30)]
    shares.served([(e, 1) for e in flood[:10]])  # the flood had the engine to itself
    steady = pending("steady", "s0", 11.0)
    view = shares.view(RequestQueue(flood[10:] + [steady]))
    assert view is not None and list(view) == [steady]


def test_tenants_within_a_quantum_batch_together():
    shares = TenantShares(quantum=4)
    a, b = pending("a", "a0"), pending("b", "b0")
    shares.served([(pending("a", "x"), 2)])
    assert shares.view(RequestQueue([a, b])) is None


def test_weights_split_a_saturated_engine_in_proportion():
    shares = TenantShares({"gold": 3}, quantum=1)
    queue = RequestQueue([pending(t, f"{t}{i}", i) for i in range(200) for t in ("gold", "free")])
    served = {"gold": 0, "free": 0}
    for _ in range(80):  # one request per batch, picked oldest-first from what the view allows
        visible = shares.view(queue) or queue
        e = min(visible, key=lambda x: x.arrival)
        shares.served([(e, 1)], queue)
        queue.discard(e)
        served[e.tenant] += 1
    assert abs(served["gold"] / 3 - served["free"]) <= 2  # 60:20 give or take the quantum and one request


def test_an_idle_tenant_cannot_bank_credit():
    shares = TenantShares(quantum=1)
    for i in range(50):
        shares.served([(pending("busy", f"b{i}"), 1)])
    late = [pending("late", f"l{i}") for i in range(5)]
    busy = [pending("busy", f"b{i}") for i in range(5)]
    queue = RequestQueue(late + busy)
    order = []
    for _ in range(6):
        visible = shares.view(queue) or queue
        e = next(iter(visible))
        shares.served([(e, 1)], queue)
        queue.discard(e)
        order.append(e.tenant)
    assert "busy" in order  # the late tenant did not get 50 batches in a row


@pytest.mark.parametrize("weights", [{"a": 0}, {"a": -1}, {"a": "2"}, {"a": True}])
def test_bad_weights_are_named(weights):
    with pytest.raises(ValueError, match="tenant_shares"):
        TenantShares(weights)


def steady_start(tenanted: bool) -> tuple[float, list[float]]:
    """20 calls of a flooding program at t=0 and one of another tenant at t=1 ms on an engine that
    runs one 2-call batch at a time: when the late call started, and when the flood's calls did."""

    async def main():
        engine = StepDecoder("llm", step=0.01, max_efficient_batch=2)
        rt = Runtime(
            {"llm": Engine("llm", kind="vllm", model="m", max_batch=2, max_efficient_batch=2)},
            {"llm": engine},
            policy="fifo",
            max_inflight=1,
        )
        await rt.start()

        async def call(i: int, tenant: str, delay: float):
            await asyncio.sleep(delay)
            out = await rt.submit_call(
                "llm",
                {"parts": [["user", f"c{i}"]], "max_tokens": 5},
                program=f"p{i}",
                call_id=f"c{i}",
                parents=[],
                tenant=tenant if tenanted else "",
            )
            return out.started

        try:
            flood = [call(i, "flood", 0.0) for i in range(20)]
            started = await asyncio.gather(call(99, "steady", 0.001), *flood)
        finally:
            await rt.stop()
        return started[0], started[1:]

    return run_virtual(main())


def test_a_late_tenant_is_served_before_a_flood_that_arrived_first():
    late, flood = steady_start(tenanted=True)
    assert sum(t < late for t in flood) <= 4  # the batch running when it arrived, and at most one more
    late_alone, flood_alone = steady_start(tenanted=False)
    assert all(t <= late_alone for t in flood_alone)  # without tenants: arrival order, after all 20
