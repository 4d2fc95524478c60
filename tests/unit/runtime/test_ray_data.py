"""The pieces of the Ray "refs" data path that need no cluster (teola.runtime.executors.ray_data): which
results a batch keeps remote, how the driver turns them into RemoteItems, and how an actor
resolves them (any awaitable stands in for an ObjectRef here), including a lost one."""

import asyncio

import numpy as np
import pytest

from teola.runtime.executors.ray_data import (
    KEEP,
    IntermediateLost,
    RemoteItem,
    approx_bytes,
    attach_refs,
    count_remote,
    resolve_inputs,
    split_results,
)

VEC = [0.5] * 384  # 3 KiB estimated


def test_approx_bytes_counts_vectors_texts_and_arrays():
    assert approx_bytes(VEC) == 384 * 8
    assert approx_bytes([VEC] * 10) == 10 * 384 * 8
    assert approx_bytes({"text": "abcd", "score": 1.0}) == 12
    assert approx_bytes(bytearray(5)) == 5
    assert approx_bytes(np.zeros((4, 384), dtype=np.float32)) == 4 * 384 * 4


def test_split_results_keeps_marked_results_from_the_threshold_on():
    reqs = [{"text": "a", KEEP: True}, {"text": "b"}, {"text": "c", KEEP: True}]
    res = [VEC, [1.0], VEC]
    assert split_results(reqs, res, min_bytes=10 * 1024) == ((res, []), None)  # 6 KiB < 10 KiB
    head, kept = split_results(reqs, res, min_bytes=1024)
    assert head == ([None, [1.0], None], [0, 2]) and kept == [VEC, VEC]
    assert split_results([{"text": "a"}], [VEC], 0) == (([VEC], []), None)  # nothing marked
    assert split_results(reqs, res[:2], 0) == ((res[:2], []), None)  # wrong count: reported upstream


def test_attach_refs_gives_one_remote_item_per_kept_result():
    out = attach_refs(([None, [1.0], None], [0, 2]), "REF", "embedding/1")
    assert out[0] == RemoteItem("REF", 0, "embedding/1") and out[2] == RemoteItem("REF", 1, "embedding/1")
    assert out[1] == [1.0] and count_remote(out) == 2


async def test_resolve_inputs_fetches_each_object_once_and_strips_the_flag():
    loop = asyncio.get_running_loop()
    calls = []

    class Ref:
        def __await__(self):
            calls.append(1)
            f = loop.create_future()
            f.set_result([[1.0], [2.0]])
            return f.__await__()

    ref = Ref()
    reqs = [
        {"embedding": RemoteItem(ref, 1, "embedding/0"), "top_k": 2},
        {"embedding": RemoteItem(ref, 0, "e"), KEEP: True},
    ]
    assert await resolve_inputs(reqs) == [{"embedding": [2.0], "top_k": 2}, {"embedding": [1.0]}]
    assert len(calls) == 1
    plain = [{"text": "x"}]
    assert await resolve_inputs(plain) is plain


async def test_a_lost_intermediate_output_fails_with_its_producer_named():
    f = asyncio.get_running_loop().create_future()
    f.set_exception(RuntimeError("owner died"))
    with pytest.raises(IntermediateLost, match=r"engine instance embedding/0 .*RuntimeError: owner died"):
        await resolve_inputs([{"embedding": RemoteItem(f, 0, "embedding/0")}])
