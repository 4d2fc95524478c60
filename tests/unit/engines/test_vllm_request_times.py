"""The seconds the vLLM adapter reads from a request's `RequestOutput.metrics` (vLLM's
`RequestStateStats`): its time in vLLM's queue and in the running batch, hand-computed; nothing where
vLLM kept no stats or preempted the request itself (engines/vllm/outputs.py)."""

from types import SimpleNamespace

import pytest

from engines.vllm.outputs import call_counts, executor_seconds, queued_seconds


def output(**stats):
    metrics = SimpleNamespace(queued_ts=0.0, scheduled_ts=0.0, last_token_ts=0.0, num_preemptions=0)
    metrics.__dict__.update(stats)
    return SimpleNamespace(metrics=metrics, num_cached_tokens=0, outputs=[], kv_transfer_params=None)


def test_a_request_scheduled_at_10_with_its_latest_token_at_12_5_ran_2_5_s_after_waiting_0_5():
    out = output(queued_ts=9.5, scheduled_ts=10.0, last_token_ts=12.5)
    assert executor_seconds(out) == pytest.approx(2.5)
    assert queued_seconds(out) == pytest.approx(0.5)
    counts = call_counts(out, 7)
    assert counts["executor_s"] == pytest.approx(2.5)
    assert counts["queued_s"] == pytest.approx(0.5)
    assert counts["num_prompt_tokens"] == 7


def test_a_request_vllm_preempted_or_never_scheduled_reports_no_executor_time():
    preempted = output(queued_ts=9.5, scheduled_ts=10.0, last_token_ts=14.0, num_preemptions=1)
    assert executor_seconds(preempted) is None
    assert "executor_s" not in call_counts(preempted, 7)
    assert queued_seconds(preempted) == pytest.approx(0.5)
    assert executor_seconds(output()) is None
    assert queued_seconds(output()) is None


def test_an_output_without_stats_reports_neither():
    bare = SimpleNamespace(num_cached_tokens=3, outputs=[], kv_transfer_params=None)
    assert executor_seconds(bare) is None
    counts = call_counts(bare, 7)
    assert "executor_s" not in counts and "queued_s" not in counts
    assert counts["num_cached_tokens"] == 3
