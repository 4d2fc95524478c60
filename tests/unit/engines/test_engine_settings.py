"""Engine settings for the hardware found: no more busy threads than cores on a CPU machine, disjoint
cores for several LLM instances, nothing changed on GPUs, and explicit options always winning."""

from __future__ import annotations

import json
import os

import pytest

from engines.machine.hardware import Hardware
from engines.tuning.settings import busy_threads, default_settings, report, resolve_options, tuned_settings
from engines.vllm.layout import parse_cpu_list, spawn_layout

SHIPPED = [
    ("vllm", 1),
    ("sentence_transformers", 1),
    ("reranker", 1),
]  # the advanced-RAG app's compute engines


def resolved(hw: Hardware, engines=SHIPPED, tuned=None, explicit=None) -> list[tuple[str, dict]]:
    out = []
    for kind, n in engines:
        for i in range(n):
            out.append((kind, resolve_options(kind, (explicit or {}).get(kind, {}), i, n, hw, tuned or {})))
    return out


def test_two_core_cpu_defaults_put_no_more_busy_threads_than_cores():
    hw = Hardware(cores=2, gpu=False)
    settings = resolved(hw)
    assert busy_threads(settings, hw) <= 2
    llm = dict(settings)["vllm"]
    assert llm == {"worker_process": False, "cpu_threads_bind": "1", "share_cores": True}
    assert all(opts["share_cores"] for _, opts in settings)  # home cores above, lent while the others idle


def test_vllm_defaults_as_shipped_oversubscribe_and_are_reported():
    """The check itself can fail: vLLM's own layout (separate worker, no binding) plus torch's
    default threads is over the core count, and `report` warns about it."""
    hw = Hardware(cores=2, gpu=False)
    library_defaults = [("vllm", {}), ("sentence_transformers", {}), ("reranker", {})]
    assert busy_threads(library_defaults, hw) > 2
    tuned = {"vllm": {"worker_process": True, "cpu_threads_bind": "auto"}, "reranker": {"torch_threads": 2}}
    _, warnings = report(hw, tuned=tuned)
    assert any("busy threads on 2 core(s)" in w for w in warnings)


def test_several_llm_instances_get_disjoint_cores():
    hw = Hardware(cores=5, gpu=False)
    binds = [parse_cpu_list(o["cpu_threads_bind"]) for _, o in resolved(hw, [("vllm", 2)])]
    assert binds == [[1, 2], [3, 4]]
    assert not set(binds[0]) & set(binds[1]) and 0 not in binds[0] + binds[1]


def test_gpu_machines_keep_library_defaults():
    hw = Hardware(cores=8, gpu=True)
    assert all(default_settings(kind, 0, 1, hw) == {} for kind, _ in SHIPPED)


def test_explicit_options_win_over_tuned_values_and_defaults():
    hw = Hardware(cores=4, gpu=False)
    tuned = {"vllm": {"worker_process": True}, "sentence_transformers": {"torch_threads": 3}}
    opts = resolve_options("vllm", {"cpu_threads_bind": "0-3", "model": "m"}, 0, 1, hw, tuned)
    assert opts == {
        "worker_process": True,
        "cpu_threads_bind": "0-3",
        "model": "m",  # tuned > default, explicit > all
        "share_cores": True,
    }
    opts = resolve_options("sentence_transformers", {"torch_threads": 2}, 0, 1, hw, tuned)
    assert opts["torch_threads"] == 2 and opts["exclusive"] is True
    assert resolve_options("pgvector", {"dsn": "x"}, 0, 1, hw, tuned) == {"dsn": "x"}


def test_tuned_file_round_trip_and_bad_files(tmp_path):
    path = tmp_path / "engine-settings.json"
    assert tuned_settings(path) == {}
    path.write_text(json.dumps({"chosen": {"vllm": {"worker_process": False, "junk": 1}}}))
    assert tuned_settings(path) == {"vllm": {"worker_process": False}}
    path.write_text("{not json")
    with pytest.raises(ValueError, match="not valid JSON"):
        tuned_settings(path)
    path.write_text(json.dumps({"chosen": [1]}))
    with pytest.raises(ValueError, match="teola tune"):
        tuned_settings(path)


def test_cpu_lists():
    assert parse_cpu_list("0-2,5") == [0, 1, 2, 5]
    for bad in ("a", "3-1", "1-", ""):
        with pytest.raises(ValueError, match="bad CPU list"):
            parse_cpu_list(bad)


def test_spawn_layout_sets_and_restores_environment_and_affinity():
    before_env = {k: os.environ.get(k) for k in ("VLLM_ENABLE_V1_MULTIPROCESSING", "OMP_NUM_THREADS")}
    before_aff = os.sched_getaffinity(0)
    core = min(before_aff)
    with spawn_layout(on_cpu=True, worker_process=False, cpu_threads_bind=str(core)):
        assert os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] == "0"
        assert os.environ["OMP_NUM_THREADS"] == "1"
        assert os.sched_getaffinity(0) == {core}
    assert os.sched_getaffinity(0) == before_aff
    assert {k: os.environ.get(k) for k in before_env} == before_env
    with spawn_layout(on_cpu=True, worker_process=True, cpu_threads_bind="auto"):
        assert os.environ["VLLM_CPU_OMP_THREADS_BIND"] == "auto"
        assert os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] == "1"


def test_cpu_llm_dtype_is_float32_only_where_bfloat16_is_emulated():
    from engines.machine.hardware import cpu_llm_dtype, native_bf16

    avx2 = frozenset({"avx", "avx2", "fma"})
    avx512_bf16 = avx2 | {"avx512f", "avx512_bf16"}
    amx = avx2 | {"amx_bf16", "amx_tile"}
    arm_bf16 = frozenset({"asimd", "bf16"})
    assert not native_bf16(avx2) and native_bf16(avx512_bf16) and native_bf16(amx) and native_bf16(arm_bf16)
    assert native_bf16(frozenset())  # unreadable flags: no second-guessing
    assert cpu_llm_dtype("auto", avx2) == "float32"
    assert cpu_llm_dtype("auto", avx512_bf16) == "auto"
    assert cpu_llm_dtype("bfloat16", avx2) == "bfloat16"  # an explicit choice is kept


def test_the_batch_probe_embeds_chunks_of_the_apps_size_not_short_sentences():
    from engines.tuning.tune import CHUNKS, app_chunks
    from teola.compile.chunking import count_tokens

    chunks = app_chunks(64)
    assert len(chunks) == 64 and len(set(chunks)) == 64
    sizes = [count_tokens(c) for c in chunks]
    assert max(sizes) <= 256 and sorted(sizes)[32] > 200  # most are whole 256-token windows
    assert max(count_tokens(c) for c in CHUNKS) < 30


def test_the_cpu_embedder_batches_at_most_eight_chunks_unless_tuned_or_given():
    from engines.tuning.settings import CPU_EMBED_BATCH

    cpu, gpu = Hardware(cores=2, gpu=False), Hardware(cores=8, gpu=True)
    assert (
        resolve_options("sentence_transformers", {}, hw=cpu, tuned={})["max_efficient_batch"]
        == CPU_EMBED_BATCH
        == 8
    )
    assert "max_efficient_batch" not in resolve_options("sentence_transformers", {}, hw=gpu, tuned={})
    assert "max_efficient_batch" not in resolve_options("reranker", {}, hw=cpu, tuned={})
    tuned = {"sentence_transformers": {"max_efficient_batch": 2}}
    assert resolve_options("sentence_transformers", {}, hw=cpu, tuned=tuned)["max_efficient_batch"] == 2
    assert (
        resolve_options("sentence_transformers", {"max_efficient_batch": 32}, hw=cpu, tuned=tuned)[
            "max_efficient_batch"
        ]
        == 32
    )


def test_an_engine_spec_takes_the_machines_max_efficient_batch_so_stage_decomposition_sees_it(monkeypatch):
    import engines.tuning.settings as es
    from teola import Engine

    monkeypatch.setenv("TEOLA_DEVICE", "cpu")
    monkeypatch.setattr(es, "tuned_settings", lambda path=None: {})
    assert Engine("embedding", kind="sentence_transformers").info().max_efficient_batch == es.CPU_EMBED_BATCH
    assert Engine("embedding", kind="sentence_transformers", max_efficient_batch=3).max_efficient_batch == 3
    monkeypatch.setattr(
        es, "tuned_settings", lambda path=None: {"sentence_transformers": {"max_efficient_batch": 2}}
    )
    assert (
        Engine("embedding", kind="sentence_transformers").max_efficient_batch == 2
    )  # `teola tune` reaches the spec
    monkeypatch.setenv("TEOLA_DEVICE", "cuda")
    monkeypatch.setattr(es, "tuned_settings", lambda path=None: {})
    assert (
        Engine("embedding", kind="sentence_transformers").max_efficient_batch == 32
    )  # the adapter's own, on GPUs


def test_a_simulated_engine_does_not_take_this_machines_batch(monkeypatch):
    import engines.tuning.settings as es
    from apps import advanced_rag
    from teola.sim.run import use_profile

    monkeypatch.setenv("TEOLA_DEVICE", "cpu")
    monkeypatch.setattr(es, "tuned_settings", lambda path=None: {})
    app = advanced_rag.build()
    assert app.engines["embedding"].max_efficient_batch == es.CPU_EMBED_BATCH
    use_profile(app, "a100-llama2-7b")
    assert app.engines["embedding"].max_efficient_batch == 64  # the simulated GPU engine's, from its profile


def test_a_simulated_engine_takes_the_profiled_machines_batch(monkeypatch):
    import copy

    import engines.tuning.settings as es
    from apps import advanced_rag
    from engines.sim.profile import load_profile
    from teola.sim.run import use_profile

    monkeypatch.setattr(es, "tuned_settings", lambda path=None: {})
    app = advanced_rag.build()
    use_profile(app, "cpu-smollm2-135m")  # fitted on a CPU machine whose embedder ran batches of 8
    assert app.engines["embedding"].max_efficient_batch == 8
    assert app.engines["reranker"].max_efficient_batch == 32
    profile = copy.deepcopy(load_profile("cpu-smollm2-135m"))
    del profile["engines"]["sentence_transformers"][
        "max_efficient_batch"
    ]  # a profile from before it was recorded
    app = advanced_rag.build()
    use_profile(app, profile)
    assert app.engines["embedding"].max_efficient_batch == 32


def test_the_report_says_whether_engines_lend_their_cores():
    hw = Hardware(cores=2, gpu=False)
    lines, _ = report(hw, tuned={})
    assert any(line.startswith("core lending: on") and "all 2 cores" in line for line in lines)
    lines, _ = report(hw, tuned={"vllm": {"share_cores": False}})
    assert "core lending: off (each engine keeps its cores)" in lines
