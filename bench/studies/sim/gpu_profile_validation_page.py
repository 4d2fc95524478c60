"""The page of the GPU profile validation (bench/results/sim/gpu_profile_validation.md): the figures' table
with each simulated part's share of the time, where a figure beyond the threshold differs, the reading
and the sources; rendered from the rows bench/studies/sim/gpu_profile_validation.py simulates."""

from __future__ import annotations

from typing import Any

from bench.lib.tables import pct, table
from bench.studies.sim.gpu_figures import PARTS

THRESHOLD = 0.25
READING = (
    "Reading. vLLM, Llama-3-8B: with 10 requests the simulator is 8% slower over the run, 12.4-12.9 ms per "
    "decode iteration against about 11.4 ms measured (the run's tokens arrive 10 at a time, about 114 ms "
    "apart). The assumed 2 ms CPU step is 16% of the simulated time; multi-step scheduling, which the "
    "10-token groups point to, spreads that CPU work over 10 iterations, and without it the simulator would "
    "be about 9% faster than the run, so the GPU part agrees within about 10% either way. With 80 requests "
    "(decode batches up to 80, prefill 11% of the time) the throughput is within 2%. The first token of the "
    "10-request run (-28%) is the HTTP client's time, which holds the API server's work the simulator does "
    "not price. Prefill alone (the batch-1 first-token rows, 85-97% linear layers) is within -10% to +7%: "
    "the measured token tables and the assumed 50% prefill attention efficiency hold there. Llama-2-7B "
    "throughput is 8-15% below the published one (the simulator slower), the NeMo batch latencies 0-14% "
    "below (the simulator faster, more so at batch 8; NVIDIA/NeMo discussion 8455 questions its batch-1 "
    "rows, where Llama-2-13B is faster than Llama-2-7B). The other figure beyond 25% is Llama-2-70B at TP4 "
    "with 2,048 output tokens: the simulator is faster, and the gap is in the decode iterations at long "
    "context. The linear layers and all-reduces there are the measured tables at 240 tokens, so the "
    "likeliest wrong assumption is decode attention: the profile prices it as a memory roofline over the KV "
    "heads' bytes (8 of Llama-2-70B's 64 heads, 2 per GPU at TP4), i.e. a kernel that reads each K/V head "
    "once for its whole group of query heads. A kernel that reads K/V once per query head would cost 8x "
    "that, more than the published figure implies (the 3.1x above); for Llama-2-7B, whose heads are not "
    "grouped, the same roofline gives the -13% of the 2,048-output row. Which of the two the published run "
    "used is not stated in the sources at hand (they date TensorRT-LLM's Hopper XQA kernels for Llama-2-70B "
    "to its v0.10.0 release notes, later than this data, and say nothing of the A100 kernel of v0.6.1). No "
    "constant was changed toward the published figure: the measured data here holds no attention kernel "
    "timings."
)


def _source_label(source: str) -> str:
    return (
        "vLLM (Lambda)"
        if source.startswith("Lambda")
        else "TRT-LLM peak"
        if "Peak" in source
        else "TRT-LLM latency"
        if "Low Latency" in source
        else "NeMo"
    )


def _workload(r: dict[str, Any]) -> str:
    shape = (
        f"{r['batch']} ShareGPT requests, {r['input']:,} / {r['output']:,} tokens in all"
        if r["lengths"]
        else f"batch {r['batch']}, {r['input']} / {r['output']}"
    )
    return f"{r['model']} TP{r['tp']} on {r['gpu']}, {shape}"


def _fmt(v: float) -> str:
    return f"{v:,.0f}" if v >= 100 else f"{v:.1f}"


def gap(r: dict[str, Any]) -> str:
    """Where a figure beyond the threshold differs: the published run's implied seconds against the
    simulated parts, per decode iteration, and the factor on decode attention that would close it."""
    if r["metric"] == "ttft_ms":
        return (
            f"{_workload(r)}: first token {_fmt(r['value'])} ms published, {_fmt(r['simulated'])} ms "
            f"SIMULATED, of which the prefill iteration's linear layers are "
            f"{r['parts_s']['prefill_linear'] * 1e3:.1f} ms (measured table). The published time is "
            f"measured at an HTTP client: the API server, tokenization and scheduling before the first "
            f"iteration are in it and not in the simulator, which prices iterations only."
        )
    implied = (
        r["batch"] * r["output"] / (r["value"] * r["tp"])
        if r["metric"] == "throughput_tok_s"
        else r["value"] / 1000.0
    )
    steps = max(1, r["output"] - 1)
    parts = r["parts_s"]
    per_step = {k: parts[k] / steps * 1e3 for k in ("decode_linear", "decode_attention")}
    missing = implied - r["seconds"]
    factor = 1 + missing / parts["decode_attention"] if parts["decode_attention"] else float("nan")
    return (
        f"{_workload(r)}: the published figure "
        f"implies {implied:.1f} s for the batch, the simulator takes {r['seconds']:.1f} s "
        f"({missing / steps * 1e3:+.1f} ms per decode iteration would close it; simulated per decode "
        f"iteration: linear layers + all-reduces {per_step['decode_linear']:.1f} ms, attention "
        f"{per_step['decode_attention']:.1f} ms, CPU step + LM head "
        f"{(parts['cpu_step'] + parts['lm_head']) / r['output'] * 1e3:.1f} ms). Decode attention "
        f"{factor:.1f}x the modelled one would close it alone."
    )


def intro(rows: list[dict[str, Any]]) -> list[str]:
    """The page's title, how it was made, the published figures it compares and the error in short."""
    over = [r for r in rows if abs(r["error"]) > THRESHOLD]
    errs = sorted(abs(r["error"]) for r in rows)
    return [
        "# SIMULATED: measured-operator GPU profiles against published end-to-end figures",
        "",
        (
            "Generated by `python -m bench gpu_profile_validation` (offline: the shipped profiles and the "
            "figures below; data in gpu_profile_validation.json). **Every simulated figure is SIMULATED**: "
            "the simulator's replica (teola/sim/replica.py) runs each published workload, requests all "
            "present at the start with the input and output lengths the source states, on the profile `teola "
            "profile --from-measured` built for the same model and GPU (engines/profiles/; linear layers and "
            "all-reduces measured by Vidur, decode attention derived, prefill attention efficiency and the 2 "
            "ms CPU step assumed: docs/simulator.md). Nothing was tuned toward these figures. error = "
            "(simulated - published) / published; ** marks |error| > 25%; * marks a prefill iteration past "
            "the largest measured token count (4,096: the table's last slope extended)."
        ),
        "",
        (
            "The published figures: two vLLM runs (Lambda's public benchmark results: Llama-3-8B on one A100 "
            "80GB SXM, 10 and 80 ShareGPT requests sent at once, each request's input and output length "
            "recorded) and TensorRT-LLM runs (NVIDIA's static-batch benchmark and the NeMo export) of "
            "Llama-2-7B and Llama-2-70B. No vLLM or paper figure with a stated workload was found for "
            "Llama-2-7B or Llama-2-70B on these GPUs (Autellix's vLLM curves for Llama-3.1-8B on an A100 are "
            "plots, not numbers). The simulator models a vLLM-like engine, so a TensorRT-LLM figure tests "
            "the GPU cost (the operator tables and the attention model) more than the engine's scheduling: "
            "for a static batch both run one prefill iteration, then one decode iteration per output token."
        ),
        "",
        (
            f"Median |error| {errs[len(errs) // 2]:.0%}, largest {errs[-1]:.0%}; {len(over)} of {len(rows)} "
            f"figures beyond 25%."
        ),
        "",
    ]


def figures_table(rows: list[dict[str, Any]]) -> list[str]:
    """One row per figure: the workload, published against SIMULATED, the error, each part's share."""
    cells = []
    for r in rows:
        mark = "**" if abs(r["error"]) > THRESHOLD else ""
        inout = (
            f"{r['input']:,} / {r['output']:,} in all" if r["lengths"] else f"{r['input']} / {r['output']}"
        )
        cells.append(
            [
                _source_label(r["source"]),
                r["model"],
                r["gpu"],
                r["tp"],
                f"{r['batch']}{'*' if r['extrapolated'] else ''}",
                inout,
                r["metric"],
                _fmt(r["value"]),
                _fmt(r["simulated"]),
                f"{mark}{r['error']:+.1%}{mark}",
                *(pct(r["parts_s"][p] / r["seconds"]) for p in PARTS),
            ]
        )
    return table(
        [
            "source",
            "model",
            "GPU",
            "TP",
            "batch",
            "in / out",
            "metric",
            "published",
            "SIMULATED",
            "error",
            "prefill lin",
            "prefill attn",
            "decode lin",
            "decode attn",
            "CPU step",
            "LM head",
        ],
        cells,
        "lllrrllrrrrrrrrr",
    )


def page(rows: list[dict[str, Any]]) -> str:
    over = [r for r in rows if abs(r["error"]) > THRESHOLD]
    lines = intro(rows) + figures_table(rows)
    lines += [
        "",
        (
            "The last six columns: share of the simulated time in each part (linear layers and "
            "all-reduces from the measured token table, attention from the derived / assumed terms, the "
            "assumed 2 ms CPU step per iteration, the derived LM head weight read per iteration)."
        ),
        "",
        "## Beyond 25%",
        "",
    ]
    lines += [f"- {gap(r)}" for r in over] or ["- none"]
    return "\n".join(lines + ["", READING, ""] + sources(rows)) + "\n"


def sources(rows: list[dict[str, Any]]) -> list[str]:
    """The sources of the figures, their notes, and the per-GPU rows read as totals."""
    lines = ["## Sources", ""]
    for src in dict.fromkeys(r["source"] for r in rows):
        lines.append(f"- {src}")
    notes = {r["note"] for r in rows if r["note"]}
    lines += [f"- note: {n}" for n in sorted(notes)]
    total = [r for r in rows if r["metric"] == "throughput_tok_s" and r["tp"] > 1]
    if total:
        lines.append(
            "- read as totals, those rows' errors would be "
            + ", ".join(f"{r['simulated'] * r['tp'] / r['value'] - 1:+.0%}" for r in total)
        )
    return lines
