"""SIMULATED end-to-end figures of the measured-operator GPU profiles against published ones for the
same model and GPU: each published workload (requests all present at the start, with the input and
output lengths the source states) run by the simulator's iteration-level replica (teola/sim/replica.py) on the matching
profile of engines/profiles/, the error in percent, and where the simulated time goes.

    python -m bench gpu_profile_validation [--out bench/results/gpu_profile_validation.md]
"""
from __future__ import annotations

import argparse
import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bench.lib.results import RESULTS
from bench.lib.tables import pct, table
from engines.sim.cost import IterationCost
from engines.sim.profile import load_profile
from teola.sim.replica import SimRequest, simulate_replica

OUT = RESULTS / "gpu_profile_validation.md"
THRESHOLD = 0.25
READING = (
    "Reading. vLLM, Llama-3-8B: with 10 requests the simulator is 8% slower over the run, 12.4-12.9 ms per "
    "decode iteration against about 11.4 ms measured (the run's tokens arrive 10 at a time, about 114 ms apart). "
    "The assumed 2 ms CPU step is 16% of the simulated time; multi-step scheduling, which the 10-token groups "
    "point to, spreads that CPU work over 10 iterations, and without it the simulator would be about 9% faster "
    "than the run, so the GPU part agrees within about 10% either way. With 80 requests (decode batches up to "
    "80, prefill 11% of the time) the throughput is within 2%. The first token of the 10-request run (-28%) is "
    "the HTTP client's time, which holds the API server's work the simulator does not price. Prefill alone (the batch-1 first-token rows, 85-97% linear layers) is within -10% to +7%: the "
    "measured token tables and the assumed 50% prefill attention efficiency hold there. Llama-2-7B throughput "
    "is 8-15% below the published one (the simulator slower), the NeMo batch latencies 0-14% below (the "
    "simulator faster, more so at batch 8; NVIDIA/NeMo discussion 8455 questions its batch-1 rows, where Llama-2-13B is faster than Llama-2-7B). "
    "The other figure beyond 25% is Llama-2-70B at TP4 with 2,048 output tokens: the simulator is faster, and "
    "the gap is in the decode iterations at long context. The linear layers and all-reduces there are the "
    "measured tables at 240 tokens, so the likeliest wrong "
    "assumption is decode attention: the profile prices it as a memory roofline over the KV heads' bytes "
    "(8 of Llama-2-70B's 64 heads, 2 per GPU at TP4), i.e. a kernel that reads each K/V head once for its "
    "whole group of query heads. A kernel that reads K/V once per query head would cost 8x that, more than "
    "the published figure implies (the 3.1x above); for Llama-2-7B, whose heads are not grouped, the same "
    "roofline gives the -13% of the 2,048-output row. Which of the two the published run used is not "
    "stated in the sources at hand (they date TensorRT-LLM's Hopper XQA kernels for Llama-2-70B to its v0.10.0 "
    "release notes, later than this data, and say nothing of the A100 kernel of v0.6.1). No constant was "
    "changed toward the published figure: the measured data here holds no attention kernel timings.")

TRTLLM = ("TensorRT-LLM's docs/source/performance.md ('This data has been updated for v0.6.1'; GPT-J, Llama2-7b "
          "and Llama2-70b engines, its Methodology section), https://github.com/NVIDIA/TensorRT-LLM/blob/"
          "138f96d45f90b9667426f7c47297d8c06bafac73/docs/source/performance.md")
TRTLLM_PEAK = f"{TRTLLM}, 'Peak Throughput: A100 GPUs (FP16)' table (gptSessionBenchmark, static batch)"
TRTLLM_LATENCY = f"{TRTLLM}, 'Low Latency: A100 GPUs (FP16)' table (v0.5 data, batch 1, 1st token latency)"
NEMO = ("NVIDIA NeMo Framework user guide, Performance > Llama-2 Results > Inference Performance, "
        "Configuration 1 'Chatbot Conversation' table (TensorRT-LLM export; precision not stated), "
        "https://docs.nvidia.com/nemo-framework/user-guide/latest/performance/llama.html")


LAMBDA_RUN = ("Lambda's vLLM benchmark (LambdaLabsML/vllm-benchmark) at commit a9b42a5f83bc39976bcb6bd44a96b2b15d820e10, "
              "results/prompt_{n}/1xA100-80GB-SXM/Meta-Llama-3-8B-Instruct_tp1_len2000.json: backend vllm, {n} ShareGPT "
              "prompts sent at once (request rate inf), {what}, each request's input_lens and output_lens listed")
LAMBDA = LAMBDA_RUN.format(n=10, what="output_throughput 227.04 tok/s over 8.567 s, mean_ttft_ms 139.23")
LAMBDA_80 = LAMBDA_RUN.format(n=80, what="output_throughput 1197.26 tok/s over 11.859 s")
LAMBDA_LENGTHS = tuple(zip((13, 25, 27, 10, 329, 29, 399, 328, 4, 205), (120, 507, 233, 194, 101, 741, 9, 3, 6, 31)))
LAMBDA_80_LENGTHS = tuple(zip(
    (13, 25, 27, 10, 329, 29, 399, 328, 4, 205, 16, 372, 403, 9, 12, 770, 227, 8, 14, 390, 659, 59, 76, 744, 619, 279,
     344, 9, 10, 45, 11, 4, 80, 768, 317, 40, 619, 8, 298, 16, 17, 696, 575, 11, 7, 281, 12, 147, 481, 770, 336, 6, 331,
     9, 45, 222, 802, 481, 93, 641, 22, 15, 16, 77, 32, 689, 178, 9, 628, 480, 42, 336, 24, 515, 761, 112, 113, 348,
     82, 467),
    (120, 495, 233, 194, 101, 741, 9, 3, 6, 31, 392, 84, 396, 45, 291, 9, 173, 277, 334, 37, 587, 361, 36, 135, 26, 45,
     450, 118, 226, 4, 5, 146, 59, 11, 567, 192, 478, 130, 13, 223, 188, 16, 35, 276, 202, 492, 239, 129, 26, 79, 17,
     204, 11, 207, 78, 340, 17, 9, 123, 6, 559, 5, 316, 26, 417, 206, 151, 42, 25, 18, 159, 0, 25, 267, 19, 12, 768, 67,
     628, 11)))
LAMBDA_NOTE = ("the vLLM version is not in the result file (the repository's scripts default to v0.5.4, the run "
               "is dated 2024-09-07); its tokens arrive about 10 at a time (its itls: about 114 ms each), as "
               "multi-step scheduling streams them, i.e. about 11.4 ms per decode iteration; the measured "
               "time includes the HTTP server and streaming; with 80 prompts (19,504 tokens) vLLM without chunked "
               "prefill prefills them in several iterations of at most 8,192 tokens before any decodes, the "
               "simulator in one (the same linear-layer and attention work, two CPU steps fewer), so only the "
               "80-prompt run's throughput is compared, not its first tokens")
PER_GPU = ("the A100 table's header says 'out tok/s'; the Llama-2-70B rows are read per GPU (simulated total / "
           "4) because the same page's H100 table states per GPU and a total of 670 tok/s at batch 1,280 would "
           "make one decode iteration 1.9 s, five times the page's own 377 ms first-token latency of a "
           "2,048-token prompt at TP4")


@dataclass(frozen=True, slots=True)
class Published:
    """One published end-to-end figure: a static batch of `batch` requests of `input` prompt tokens
    and `output` output tokens (the first from the prefill) on `gpu` at tensor-parallel degree `tp`."""

    source: str
    model: str
    gpu: str
    tp: int
    batch: int
    input: int
    output: int
    metric: str   # "latency_ms" (the batch's end-to-end time), "ttft_ms", "throughput_tok_s" (output tokens)
    #               "ttft_ms" is the prefill iteration (every prompt prefills in the first iteration)
    value: float
    profile: str
    note: str = ""
    lengths: tuple[tuple[int, int], ...] = ()  # per-request (prompt, output) when they differ

    def requests(self) -> list[tuple[int, int]]:
        return list(self.lengths) or [(self.input, self.output)] * self.batch


PUBLISHED = (
    Published(LAMBDA, "Llama-3-8B", "A100 80GB SXM", 1, 10, 1369, 1945, "throughput_tok_s", 227.04,
              "a100-llama3.1-8b-measured", LAMBDA_NOTE, LAMBDA_LENGTHS),
    Published(LAMBDA, "Llama-3-8B", "A100 80GB SXM", 1, 10, 1369, 1945, "ttft_ms", 139.23,
              "a100-llama3.1-8b-measured", LAMBDA_NOTE, LAMBDA_LENGTHS),
    Published(LAMBDA_80, "Llama-3-8B", "A100 80GB SXM", 1, 80, 19504, 14198, "throughput_tok_s", 1197.26,
              "a100-llama3.1-8b-measured", LAMBDA_NOTE, LAMBDA_80_LENGTHS),
    Published(TRTLLM_PEAK, "Llama-2-7B", "A100 80GB", 1, 384, 128, 128, "throughput_tok_s", 5586,
              "a100-llama2-7b-measured"),
    Published(TRTLLM_PEAK, "Llama-2-7B", "A100 80GB", 1, 60, 128, 2048, "throughput_tok_s", 1928,
              "a100-llama2-7b-measured"),
    Published(TRTLLM_PEAK, "Llama-2-7B", "A100 80GB", 1, 52, 2048, 128, "throughput_tok_s", 591,
              "a100-llama2-7b-measured"),
    Published(TRTLLM_PEAK, "Llama-2-70B", "A100 80GB", 4, 1280, 128, 128, "throughput_tok_s", 670,
              "a100-llama2-70b-tp4-measured", PER_GPU),
    Published(TRTLLM_PEAK, "Llama-2-70B", "A100 80GB", 4, 240, 128, 2048, "throughput_tok_s", 525,
              "a100-llama2-70b-tp4-measured", PER_GPU),
    Published(TRTLLM_PEAK, "Llama-2-70B", "A100 80GB", 4, 120, 2048, 128, "throughput_tok_s", 79,
              "a100-llama2-70b-tp4-measured", PER_GPU),
    Published(TRTLLM_LATENCY, "Llama-2-7B", "A100 80GB", 1, 1, 128, 1, "ttft_ms", 16, "a100-llama2-7b-measured"),
    Published(TRTLLM_LATENCY, "Llama-2-7B", "A100 80GB", 1, 1, 2048, 1, "ttft_ms", 133, "a100-llama2-7b-measured"),
    Published(TRTLLM_LATENCY, "Llama-2-70B", "A100 80GB", 4, 1, 128, 1, "ttft_ms", 47,
              "a100-llama2-70b-tp4-measured"),
    Published(TRTLLM_LATENCY, "Llama-2-70B", "A100 80GB", 4, 1, 2048, 1, "ttft_ms", 377,
              "a100-llama2-70b-tp4-measured"),
    *(Published(NEMO, "Llama-2-7B", "A100 80GB SXM4", 1, b, 128, 20, "latency_ms", ms, "a100-llama2-7b-measured")
      for b, ms in ((1, 234.0), (2, 249.6), (4, 272.6), (8, 329.5))),
    *(Published(NEMO, "Llama-2-7B", "H100 80GB HBM3", 1, b, 128, 20, "latency_ms", ms, "h100-llama2-7b-measured")
      for b, ms in ((1, 153.8), (2, 160.8), (4, 174.8), (8, 199.2))),
)

PARTS = ("prefill_linear", "prefill_attention", "decode_linear", "decode_attention", "cpu_step", "lm_head")


def _profile(name: str) -> tuple[IterationCost, float, int]:
    """A profile's iteration cost, its assumed CPU step seconds and its largest measured token count."""
    entry = load_profile(name)["engines"]["vllm"]
    cpu = float(entry["cost_provenance"]["base"]["parts"]["cpu_step_s"]["value"])
    cost = IterationCost(**entry["cost"])
    return cost, cpu, max(n for n, _ in cost.token_table)


def breakdown(cost: IterationCost, cpu_step_s: float, requests: list[tuple[int, int]]) -> dict[str, float]:
    """Seconds per part of a batch of (prompt, output) requests all present at the start: one iteration
    prefilling every prompt (each request's first output token included), then decode iterations of the
    requests not yet done; the replica runs the same iterations."""
    parts = dict.fromkeys(PARTS, 0.0)
    parts["prefill_linear"] = cost.table_seconds(sum(p for p, _ in requests))
    parts["prefill_attention"] = cost.prefill_attention * sum(p * p / 2 for p, _ in requests) / 1000.0
    steps = max(o for _, o in requests)
    for j in range(steps - 1):
        active = [p for p, o in requests if o - 1 > j]
        parts["decode_linear"] += cost.table_seconds(len(active))
        parts["decode_attention"] += cost.context_token * sum(p + 1 + j for p in active)
    parts["cpu_step"] = steps * cpu_step_s
    parts["lm_head"] = steps * (cost.base - cpu_step_s)
    return parts


def simulate(pub: Published) -> dict[str, Any]:
    """The published workload on its profile: simulated figure, error, seconds per part."""
    cost, cpu, largest = _profile(pub.profile)
    lengths = pub.requests()
    reqs = [SimRequest(i, p, o) for i, (p, o) in enumerate(lengths)]
    prompts = sum(p for p, _ in lengths)
    # every prompt prefills in one iteration (a static batch; vLLM without chunked prefill at a token
    # budget above the prompts' sum) and every request holds its KV to the end
    res = simulate_replica(reqs, cost, max_num_seqs=len(reqs), budget=prompts,
                           kv_tokens=sum(p + o for p, o in lengths))
    parts = breakdown(cost, cpu, lengths)
    assert abs(sum(parts.values()) - res.end) <= 1e-9 * max(1.0, res.end), (parts, res.end)
    seconds = res.end
    if pub.metric == "ttft_ms":  # the first iteration alone
        parts = {**dict.fromkeys(PARTS, 0.0), "prefill_linear": parts["prefill_linear"],
                 "prefill_attention": parts["prefill_attention"], "cpu_step": cpu, "lm_head": cost.base - cpu}
        seconds = sum(parts.values())
    if pub.metric == "throughput_tok_s":
        sim = sum(o for _, o in lengths) / seconds / pub.tp
    else:
        sim = seconds * 1000.0
    return {**asdict(pub), "simulated": sim, "error": (sim - pub.value) / pub.value, "seconds": seconds,
            "parts_s": parts, "extrapolated": prompts > largest}


def _source_label(source: str) -> str:
    return ("vLLM (Lambda)" if source.startswith("Lambda") else "TRT-LLM peak" if "Peak" in source
            else "TRT-LLM latency" if "Low Latency" in source else "NeMo")


def _workload(r: dict[str, Any]) -> str:
    shape = (f"{r['batch']} ShareGPT requests, {r['input']:,} / {r['output']:,} tokens in all" if r["lengths"]
             else f"batch {r['batch']}, {r['input']} / {r['output']}")
    return f"{r['model']} TP{r['tp']} on {r['gpu']}, {shape}"


def _fmt(v: float) -> str:
    return f"{v:,.0f}" if v >= 100 else f"{v:.1f}"


def gap(r: dict[str, Any]) -> str:
    """Where a figure beyond the threshold differs: the published run's implied seconds against the
    simulated parts, per decode iteration, and the factor on decode attention that would close it."""
    if r["metric"] == "ttft_ms":
        return (f"{_workload(r)}: first token {_fmt(r['value'])} ms published, {_fmt(r['simulated'])} ms "
                f"SIMULATED, of which the prefill iteration's linear layers are "
                f"{r['parts_s']['prefill_linear'] * 1e3:.1f} ms (measured table). The published time is "
                f"measured at an HTTP client: the API server, tokenization and scheduling before the first "
                f"iteration are in it and not in the simulator, which prices iterations only.")
    implied = (r["batch"] * r["output"] / (r["value"] * r["tp"]) if r["metric"] == "throughput_tok_s"
               else r["value"] / 1000.0)
    steps = max(1, r["output"] - 1)
    parts = r["parts_s"]
    per_step = {k: parts[k] / steps * 1e3 for k in ("decode_linear", "decode_attention")}
    missing = implied - r["seconds"]
    factor = 1 + missing / parts["decode_attention"] if parts["decode_attention"] else float("nan")
    return (f"{_workload(r)}: the published figure "
            f"implies {implied:.1f} s for the batch, the simulator takes {r['seconds']:.1f} s "
            f"({missing / steps * 1e3:+.1f} ms per decode iteration would close it; simulated per decode "
            f"iteration: linear layers + all-reduces {per_step['decode_linear']:.1f} ms, attention "
            f"{per_step['decode_attention']:.1f} ms, CPU step + LM head "
            f"{(parts['cpu_step'] + parts['lm_head']) / r['output'] * 1e3:.1f} ms). Decode attention "
            f"{factor:.1f}x the modelled one would close it alone.")


def page(rows: list[dict[str, Any]]) -> str:
    over = [r for r in rows if abs(r["error"]) > THRESHOLD]
    errs = sorted(abs(r["error"]) for r in rows)
    lines = [
        "# SIMULATED: measured-operator GPU profiles against published end-to-end figures", "",
        ("Generated by `python -m bench gpu_profile_validation` (offline: the shipped profiles and "
        "the figures below; data in gpu_profile_validation.json). **Every simulated figure is SIMULATED**: "
        "the simulator's replica (teola/sim/replica.py) runs each published workload, requests all present "
        "at the start with the input and output lengths the source states, on the profile `teola profile "
        "--from-measured` built for the same model and GPU (engines/profiles/; linear layers and all-reduces "
        "measured by Vidur, decode attention derived, prefill attention efficiency and the 2 ms CPU step "
        "assumed: docs/simulator.md). Nothing was tuned toward these figures. error = (simulated - "
        "published) / published; ** marks |error| > 25%; * marks a prefill iteration past the largest "
        "measured token count (4,096: the table's last slope extended)."), "",
        ("The published figures: two vLLM runs (Lambda's public benchmark results: Llama-3-8B on one A100 80GB "
         "SXM, 10 and 80 ShareGPT requests sent at once, each request's input and output length recorded) and "
         "TensorRT-LLM runs (NVIDIA's static-batch benchmark and the NeMo export) of Llama-2-7B and Llama-2-70B. "
         "No vLLM or paper figure with a stated workload was found for Llama-2-7B or Llama-2-70B on these GPUs "
         "(Autellix's vLLM curves for Llama-3.1-8B on an A100 are plots, not numbers). The simulator models a "
         "vLLM-like engine, so a TensorRT-LLM figure tests the GPU cost (the operator tables and the attention "
         "model) more than the engine's scheduling: for a static batch both run one prefill iteration, then one "
         "decode iteration per output token."), "",
        (f"Median |error| {errs[len(errs) // 2]:.0%}, largest {errs[-1]:.0%}; {len(over)} of {len(rows)} "
         f"figures beyond 25%."), ""]
    cells = []
    for r in rows:
        mark = "**" if abs(r["error"]) > THRESHOLD else ""
        inout = f"{r['input']:,} / {r['output']:,} in all" if r["lengths"] else f"{r['input']} / {r['output']}"
        cells.append([_source_label(r["source"]), r["model"], r["gpu"], r["tp"],
                      f"{r['batch']}{'*' if r['extrapolated'] else ''}", inout, r["metric"], _fmt(r["value"]),
                      _fmt(r["simulated"]), f"{mark}{r['error']:+.1%}{mark}",
                      *(pct(r["parts_s"][p] / r["seconds"]) for p in PARTS)])
    lines += table(["source", "model", "GPU", "TP", "batch", "in / out", "metric", "published", "SIMULATED", "error",
                    "prefill lin", "prefill attn", "decode lin", "decode attn", "CPU step", "LM head"],
                   cells, "lllrrllrrrrrrrrr")
    lines += ["", ("The last six columns: share of the simulated time in each part (linear layers and "
                   "all-reduces from the measured token table, attention from the derived / assumed terms, the "
                   "assumed 2 ms CPU step per iteration, the derived LM head weight read per iteration)."), "",
              "## Beyond 25%", ""]
    lines += [f"- {gap(r)}" for r in over] or ["- none"]
    lines += ["", READING, "", "## Sources", ""]
    for src in dict.fromkeys(r["source"] for r in rows):
        lines.append(f"- {src}")
    notes = {r["note"] for r in rows if r["note"]}
    lines += [f"- note: {n}" for n in sorted(notes)]
    total = [r for r in rows if r["metric"] == "throughput_tok_s" and r["tp"] > 1]
    if total:
        lines.append("- read as totals, those rows' errors would be " + ", ".join(
            f"{r['simulated'] * r['tp'] / r['value'] - 1:+.0%}" for r in total))
    return "\n".join(lines) + "\n"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of `python -m bench gpu_profile_validation`."""
    p.add_argument("--out", default=str(OUT), help="page to write (the JSON goes beside it)")


def run_cli(args: argparse.Namespace, argv: list[str], p: argparse.ArgumentParser) -> None:
    """Simulate every published figure, write the page and its JSON."""
    rows = [simulate(pub) for pub in PUBLISHED]
    out = Path(args.out)
    out.write_text(page(rows), encoding="utf-8")
    out.with_suffix(".json").write_text(json.dumps({"label": "SIMULATED", "rows": rows}, indent=1), encoding="utf-8")
    print(f"wrote {out} and {out.with_suffix('.json').name}")
