"""Assemble BENCHMARKS.md, the front page of the benchmark results, and bench/results/INDEX.md.
Usage: python -m bench report [--plots [NAME ...]]

BENCHMARKS.md is the hand-written headline in bench/results/FRONT.md (every system against every
baseline, the simulator's measured error, what is missed; each number links to its study page and
names its command) followed by a generated list of every study page by topic. INDEX.md lists every
study page (bench/results/<subject>/*.md, the subjects of bench/studies, and bench/results/archive/*.md),
one line each: its title and a link. Fails if
FRONT.md links to a page that does not exist or if BENCHMARKS.md would be over MAX_LINES lines.

`--plots` instead redraws every latency-against-load plot (bench/results/<subject>/<name>_vs_load.png) from
its page's committed JSON, without rerunning anything; `--plots NAME ...` draws those pages'
(bench/lib/plots.py)."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from bench.lib.results import ARCHIVE, RESULTS, ROOT, machine, result_dirs

MAX_LINES = 300
FRONT, INDEX = "FRONT", "INDEX"  # hand-written headline and generated index: not study pages
# Study pages in index order; pages not listed follow by name.
ORDER = [
    "targets",
    "remote_apps_search_warmups",
    "remote_apps_search_spec",
    "remote_apps",
    "remote_apps_llamadist_agent",
    "remote_apps_llamadist_search",
    "remote_apps_llamadist",
    "doc_qa_large_dist_trials",
    "doc_qa_large_dist_t2",
    "doc_qa_large_dist_t1",
    "doc_qa_large_dist_t0",
    "doc_qa_large_trials",
    "doc_qa_large_b8_t2",
    "doc_qa_large_b8_t1",
    "doc_qa_large_b8_t0",
    "doc_qa_large_eb8",
    "embed_batch",
    "doc_qa_large_t0",
    "doc_qa",
    "doc_qa_advanced_shipped",
    "doc_qa_naive_12_each",
    "doc_qa_naive_12_b8",
    "doc_qa_naive_12_shipped_t3",
    "doc_qa_naive_12_shipped_t2",
    "doc_qa_naive_12_shipped",
    "doc_qa_naive_12_memo",
    "doc_qa_naive_12",
    "stop_rules",
    "doc_qa_large",
    "doc_qa_refine_shipped",
    "doc_qa_refine",
    "doc_qa_quality_pooled",
    "doc_qa_quality_seed2",
    "doc_qa_quality_seed1",
    "doc_qa_quality_100",
    "doc_qa_quality",
    "prompts_100",
    "prompts_retrieved",
    "prompts_li_adv2",
    "prompts_teola_adv_b",
    "prompts_seed1",
    "prompts_li_adv",
    "prompts",
    "doc_qa_remote",
    "remote_overhead",
    "overlap",
    "rag",
    "load",
    "load_glibc_arenas",
    "engine_settings",
    "compile",
    "runtime",
    "prefix_ttft",
    "kv_swap",
    "programs_heavy_fcfs_swap",
    "programs_heavy_react",
    "programs_heavy",
    "programs_heavy_swap",
    "programs_vllm",
    "resume_fidelity",
    "kv_connector_probe",
    "kv_swap_resume",
    "programs",
    "length_predictor",
    "sim_fidelity_probe",
    "sim_fidelity_retime",
    "sim_fidelity_batch_curve",
    "sim_fidelity_seed1",
    "sim_fidelity_cal_systems",
    "sim_fidelity_replay_prompts",
    "sim_fidelity_prompts",
    "sim_fidelity_n12",
    "sim_fidelity_shuffled",
    "sim_fidelity_each",
    "step_shape_app",
    "step_shape_again",
    "step_shape",
    "sim_fidelity_memo",
    "sim_fidelity_device",
    "cost_forms",
    "sim_fidelity",
    "sim_fidelity_avx2",
    "sim_fidelity_avx2_cal12",
    "sim_fidelity_steps",
    "sim_fidelity_avx2_rep",
    "sim_trace_diff_load",
    "sim_trace_diff",
    "sim_trace_diff_avx2",
    "sim_speed",
    "sim_paper",
    "sim_paper_large",
    "sim_programs_sharegpt_deep",
    "sim_programs_mixed",
    "sim_programs_sharegpt",
    "sim_programs_sharegpt_auto",
    "sim_programs_lats",
    "sim_programs_fcfs",
    "sim_programs_fcfs_admit",
    "sim_programs_fcfs_x4",
    "sim_programs_loads",
    "sim_programs_tree",
    "sim_programs_tree_auto",
    "sim_programs_chat_auto",
    "sim_programs_chat_x4",
    "sim_programs_tree_x4",
    "agent_real_paired",
    "agent_real",
    "lamps_real_high_request_order",
    "lamps_real_high_resume",
    "lamps_real_high",
    "lamps_real",
    "sim_lamps",
    "sim_lamps_predicted",
    "sim_lamps_infercept_check",
    "sim_lamps_fixcheck",
    "sim_lamps_sweep",
    "sim_lamps_memory",
    "plan_study",
    "plan_real",
]
# Topics of the page list: (title, name prefixes); a page goes to the first topic whose prefix its name
# starts with, else to "Other".
TOPICS = [
    ("Earlier hand-written summary of the issues' targets", ("targets",)),
    ("End-to-end RAG, Teola §7 set-up", ("rag",)),
    (
        "Document QA vs LlamaIndex and the Teola paper's baselines: latency, LLM work, quality",
        ("doc_qa", "stop_rules"),
    ),
    ("Synthesis prompts", ("prompts",)),
    (
        "Remote services: search-augmented generation and a tool agent",
        ("remote_apps", "sweep_", "remote_overhead"),
    ),
    (
        "Engines and runtime overheads",
        (
            "embed_batch",
            "overlap",
            "engine_settings",
            "compile",
            "runtime",
            "ray",
            "load",
            "prefix_ttft",
            "core_lending",
            "pass_gate",
        ),
    ),
    ("Serving several tenants: limits and fair shares under a flood, a hostile mix", ("tenant_", "hostile_")),
    ("Program scheduling, preemption and KV swap on vLLM", ("programs", "kv_", "resume_fidelity")),
    ("LAMPS and calls that pause for tools, real engines", ("lamps_real", "agent_real", "length_predictor")),
    (
        "Simulator fidelity and speed (measured against the real engines)",
        (
            "sim_fidelity",
            "sim_trace_diff",
            "step_shape",
            "cost_forms",
            "sim_speed",
            "gpu_profiles",
            "gpu_profile_validation",
        ),
    ),
    ("SIMULATED: Teola paper set-up on GPU profiles", ("sim_paper", "sim_teola")),
    ("SIMULATED: program scheduling at Autellix's scale", ("sim_programs", "sim_autellix")),
    ("SIMULATED: LAMPS", ("sim_lamps",)),
    ("Offline planning (SamuLLM): SIMULATED study and real run", ("plan_",)),
]
HEADER = """# Benchmarks

The front page of teola's benchmark results. Every number links to the study page in bench/results/ it
comes from, which names its machine, trials and spread, and the command that reproduces it is named
beside it. Rows and sections labelled SIMULATED are not measurements (docs/simulator.md). Tests never
assert timings. Section names cited elsewhere (README, docs, code comments) are study-page titles,
all listed in [bench/results/INDEX.md](bench/results/INDEX.md). Rebuild this page and the index with
`python -m bench report` after a study writes its page.
"""
# a page or a plot in a folder of bench/results/, as FRONT.md links it
LINK = re.compile(r"\]\(((?:[a-z]+/)?[A-Za-z0-9_.-]+\.(?:md|png))\)")


def page_paths() -> dict[str, Path]:
    """Every study page by name: its file in its subject's folder (or the archive)."""
    return {p.stem: p for folder in result_dirs() for p in sorted(folder.glob("*.md"))}


def study_pages() -> list[str]:
    """Names of the study pages, in index order."""
    rank = {n: i for i, n in enumerate(ORDER)}
    return sorted(page_paths(), key=lambda n: (rank.get(n, len(ORDER)), n))


def link(name: str) -> str:
    """A page's path under bench/results/: <subject>/<name>.md."""
    return page_paths()[name].relative_to(RESULTS).as_posix()


def title(name: str) -> str:
    """A page's first heading, without its hashes (the name if it has none)."""
    for line in page_paths()[name].read_text().splitlines():
        if line.startswith("#"):
            return line.lstrip("#").strip().replace("[", "(").replace("]", ")")
    return name


def by_topic(names: list[str]) -> list[tuple[str, list[str]]]:
    groups: dict[str, list[str]] = {t: [] for t, _ in TOPICS}
    other: list[str] = []
    for n in names:
        topic = next((t for t, prefixes in TOPICS if n.startswith(prefixes)), None)
        (groups[topic] if topic else other).append(n)
    return [(t, ns) for t, ns in list(groups.items()) + [("Other", other)] if ns]


def front() -> str:
    """FRONT.md without its leading comment, its page links rewritten for the repository root."""
    text = re.sub(r"\A\s*<!--.*?-->\s*", "", (RESULTS / f"{FRONT}.md").read_text(), flags=re.S)
    missing = sorted({m for m in LINK.findall(text) if not (RESULTS / m).exists()})
    if missing:
        raise SystemExit(f"bench/results/{FRONT}.md links to missing pages or plots: {', '.join(missing)}")
    return LINK.sub(lambda m: f"](bench/results/{m.group(1)})", text).strip()


def index(groups: list[tuple[str, list[str]]], total: int) -> str:
    lines = [
        "# Benchmark study pages",
        "",
        f"All {total} study pages by topic, one line each: title and link. Generated by `python -m bench "
        "report` (topics and order: TOPICS and ORDER in bench/lib/report.py); the front page is "
        "[BENCHMARKS.md](../../BENCHMARKS.md). Each page is in the folder of its study's subject, as in "
        "bench/studies.",
    ]
    archived = sorted(p.stem for p in (RESULTS / ARCHIVE).glob("*.md"))
    if archived:
        lines[-1] += (
            f" {ARCHIVE}/ keeps older pages no current study writes whose subject is unclear: "
            + ", ".join(archived)
            + "."
        )
    for topic, names in groups:
        lines += ["", f"## {topic}", ""] + [f"- [{title(n)}]({link(n)})" for n in names]
    return "\n".join(lines) + "\n"


def page_list(groups: list[tuple[str, list[str]]], total: int) -> str:
    lines = [
        "## Study pages",
        "",
        f"All {total} pages by topic; their titles are in [bench/results/INDEX.md](bench/results/INDEX.md).",
        "",
    ]
    lines += [
        f"- **{topic}**: " + ", ".join(f"[{n}](bench/results/{link(n)})" for n in names)
        for topic, names in groups
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m bench report", description=__doc__.split("\nUsage")[0])
    p.add_argument(
        "--plots",
        nargs="*",
        metavar="NAME",
        default=None,
        help="redraw the latency-against-load plots from their JSON (default: every one already drawn)",
    )
    args = p.parse_args(argv)
    if args.plots is not None:
        from bench.lib.plots import redraw

        for path in redraw(args.plots):
            print(f"wrote {path.relative_to(ROOT)}")
        return
    names = study_pages()
    groups = by_topic(names)
    m = machine()
    text = (
        HEADER
        + f"\nLast assembled at commit {m['commit']} on {m['cpu']} ({m['cores']} cores).\n\n"
        + front()
        + "\n\n"
        + page_list(groups, len(names))
        + "\n"
    )
    lines = text.count("\n")
    if lines > MAX_LINES:
        raise SystemExit(
            f"BENCHMARKS.md would have {lines} lines (at most {MAX_LINES}): shorten "
            f"bench/results/{FRONT}.md and leave the detail to the study pages"
        )
    (RESULTS / f"{INDEX}.md").write_text(index(groups, len(names)))
    (ROOT / "BENCHMARKS.md").write_text(text)
    print(f"wrote BENCHMARKS.md ({lines} lines) and bench/results/{INDEX}.md ({len(names)} study pages)")


if __name__ == "__main__":
    main()
