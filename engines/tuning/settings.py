"""Engine settings chosen for the hardware found at start, so engines on one machine do not fight
over its cores. Three layers, each overriding the one before:

  1. defaults for the hardware (`default_settings`): on GPU machines none (vLLM's and torch's own
     defaults stay); on a CPU machine with C >= 2 cores the cores are split: every vLLM instance runs
     its model inside its engine-core process (no separate busy-polling worker process) on cores
     1..C-1 (instances of one engine get disjoint cores while there are enough), and the serving
     process keeps core 0 for its event loop and the sentence-transformers models, which compute one
     batch at a time (`exclusive`) on `torch_threads` = 1 thread, the embedder in batches of at most
     CPU_EMBED_BATCH (8) chunks. Those are the engines' home cores: with `share_cores` an engine that
     has work while the others idle computes on all the cores (engines/machine/core_lending.py), so one
     query alone runs each step on the whole machine. Measured against vLLM's default layout in
     bench/results/overheads/engine_settings.md, against larger batches in
     bench/results/overheads/embed_batch.md, and with and without lending in
     bench/results/rag/core_lending.md;
  2. tuned values from `teola tune` (`tuned_settings`: `<cache>/engine-settings.json`, by engine kind;
     with the sentence-transformers engines' max efficient batch, the knee of their measured
     latency curve);
  3. the options given in `Engine(...)`, which always win.

`busy_threads` counts the threads that compute at once under a set of settings, which `teola
doctor` compares with the core count.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from engines.assets.paths import cache_dir
from engines.machine.hardware import Hardware
from engines.vllm.layout import VLLM_KEYWORDS, cpu_list, parse_cpu_list

ST_KINDS = ("sentence_transformers", "reranker")
SETTING_KEYS = {
    "vllm": ("worker_process", "cpu_threads_bind", "share_cores"),
    "sentence_transformers": ("torch_threads", "exclusive", "max_efficient_batch", "share_cores"),
    "reranker": ("torch_threads", "exclusive", "max_efficient_batch", "share_cores"),
}
TUNED_FILE = "engine-settings.json"
# The embedder's max efficient batch on a CPU: on the apps' 256-token chunks one thread embeds
# ~14 chunks/s at any batch from 1 to 16 and 9% fewer at 32, the engine's own default (sized for
# GPUs); 8 keeps the full rate with few primitives per document and lets a reranking or a question's
# embedding slip in between another query's batches (bench/results/overheads/embed_batch.md, doc_qa_large_eb8)
CPU_EMBED_BATCH = 8


def default_settings(kind: str, index: int, instances: int, hw: Hardware) -> dict[str, Any]:
    """Settings for instance `index` of `instances` of an engine of `kind` on `hw` (see module doc)."""
    if hw.gpu or kind not in SETTING_KEYS:
        return {}
    if kind == "vllm":
        out: dict[str, Any] = {"worker_process": False}
        llm_cores = list(range(1, hw.cores))
        if llm_cores:
            share = max(1, len(llm_cores) // instances)
            start = (index * share) % len(llm_cores)
            mine = llm_cores[start : start + share] or llm_cores[-share:]
            out["cpu_threads_bind"] = cpu_list(mine)
            out["share_cores"] = True
        return out
    out = {"torch_threads": 1, "exclusive": True, "share_cores": True}
    if kind == "sentence_transformers":
        out["max_efficient_batch"] = CPU_EMBED_BATCH
    return out


def tuned_settings(path: Path | None = None) -> dict[str, dict[str, Any]]:
    """{kind: settings} written by `teola tune`; {} when there is no file. A malformed file raises
    ValueError naming it (delete it or run `teola tune` again)."""
    path = path or cache_dir() / TUNED_FILE
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}: not valid JSON ({e}); delete it or run `teola tune` again") from None
    chosen = data.get("chosen") if isinstance(data, dict) else None
    if not isinstance(chosen, dict) or not all(isinstance(v, dict) for v in chosen.values()):
        raise ValueError(
            f'{path}: expected {{"chosen": {{kind: {{setting: value}}}}}}; run `teola tune` again'
        )
    return {k: {s: v for s, v in opts.items() if s in SETTING_KEYS.get(k, ())} for k, opts in chosen.items()}


def machine_max_efficient_batch(kind: str, options: Mapping[str, Any]) -> int | None:
    """The max efficient batch this machine's settings give an engine of `kind` (hardware default <
    `teola tune`), for `Engine` specs that do not name one: stage decomposition and batching read the
    spec, so a tuned or hardware value must reach it, not only the adapter. None when there is none
    (other kinds, simulated engines, whose profiles declare their own)."""
    if "max_efficient_batch" not in SETTING_KEYS.get(kind, ()) or options.get("simulate"):
        return None
    value = resolve_options(kind, options).get("max_efficient_batch")
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 1 else None


def resolve_options(
    kind: str,
    options: Mapping[str, Any],
    index: int = 0,
    instances: int = 1,
    hw: Hardware | None = None,
    tuned: Mapping[str, Mapping[str, Any]] | None = None,
) -> dict[str, Any]:
    """An engine instance's adapter options: hardware defaults < tuned values < explicit `options`."""
    if kind not in SETTING_KEYS:
        return dict(options)
    if hw is None:
        from engines.machine.hardware import detect

        hw = detect()
    tuned = tuned_settings() if tuned is None else tuned
    return {**default_settings(kind, index, instances, hw), **dict(tuned.get(kind, {})), **dict(options)}


def busy_threads(instances: list[tuple[str, Mapping[str, Any]]], hw: Hardware) -> int:
    """Threads computing at the same time when every listed engine instance (kind, resolved
    options) is busy: a vLLM instance uses its bound cores (all cores unbound, plus one polling
    engine-core thread with a separate worker process); sentence-transformers models use their torch
    threads each, or once for all of them when they compute one at a time (`exclusive`)."""
    total, st_threads, st_shared = 0, [], True
    for kind, opts in instances:
        if kind == "vllm":
            bind = opts.get("cpu_threads_bind")
            cores = hw.cores if bind in (None, *VLLM_KEYWORDS) else len(parse_cpu_list(bind))
            separate = opts.get("worker_process")
            # vLLM's own default (None) on CPU is a separate worker process, polled by the engine core
            total += cores + (1 if separate is None or separate else 0)
        elif kind in ST_KINDS:
            st_threads.append(int(opts.get("torch_threads") or hw.cores))
            st_shared = st_shared and bool(opts.get("exclusive"))
    if st_threads:
        total += max(st_threads) if st_shared else sum(st_threads)
    return total


def report(
    hw: Hardware,
    tuned: Mapping[str, Mapping[str, Any]] | None = None,
    engines: tuple[tuple[str, str], ...] = (
        ("llm", "vllm"),
        ("embedding", "sentence_transformers"),
        ("reranker", "reranker"),
    ),
) -> tuple[list[str], list[str]]:
    """Lines describing the settings in force for `engines` (name, kind; default: the shipped apps'
    engines, one instance each, no explicit options) and warnings about oversubscription."""
    tuned = tuned_settings() if tuned is None else tuned
    lines = [
        f"hardware: {hw.describe()}",
        f"tuned settings: {json.dumps(dict(tuned)) if tuned else 'none (run `teola tune`)'}",
    ]
    resolved = []
    for name, kind in engines:
        opts = resolve_options(kind, {}, hw=hw, tuned=tuned)
        resolved.append((kind, opts))
        shown = ", ".join(f"{k}={v!r}" for k, v in sorted(opts.items())) or "library defaults"
        lines.append(f"{name} ({kind}): {shown}")
    warnings = []
    busy = busy_threads(resolved, hw)
    if hw.gpu:
        lines.append("GPU machine: vLLM's and torch's own defaults are kept")
    else:
        lines.append(f"threads computing at once when all are busy: {busy} on {hw.cores} core(s)")
        lending = all(opts.get("share_cores") for kind, opts in resolved if kind in SETTING_KEYS)
        lines.append(
            "core lending: "
            + (
                f"on (an engine with work while the others idle computes on all {hw.cores} "
                "cores; engines/machine/core_share.py)"
                if lending
                else "off (each engine keeps its cores)"
            )
        )
        from engines.machine.hardware import cpu_llm_dtype

        native = cpu_llm_dtype("auto") == "auto"
        lines.append(
            "vLLM dtype 'auto': "
            + (
                "the model's own (this CPU has native bfloat16)"
                if native
                else "float32 (this CPU has no native bfloat16)"
            )
        )
    if not hw.gpu and busy > hw.cores:
        warnings.append(
            f"{busy} busy threads on {hw.cores} core(s): engines will slow each other down; "
            "give them disjoint cores (cpu_threads_bind=, torch_threads=) or run `teola tune`"
        )
    import os

    omp = os.environ.get("OMP_NUM_THREADS")
    if omp and omp.isdigit() and int(omp) > hw.cores:
        warnings.append(f"OMP_NUM_THREADS={omp} is more than the {hw.cores} usable core(s)")
    return lines, warnings
