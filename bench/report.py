"""Assemble BENCHMARKS.md from the sections the benchmark scripts write to bench/results/*.md.
Usage: python -m bench.report"""
from __future__ import annotations

from pathlib import Path

from bench.common import RESULTS, machine

ROOT = Path(__file__).parent.parent
ORDER = ["targets", "remote_apps_search_warmups", "remote_apps_search_spec", "remote_apps", "remote_apps_llamadist_agent", "remote_apps_llamadist_search", "remote_apps_llamadist", "doc_qa_large_dist_trials", "doc_qa_large_dist_t2", "doc_qa_large_dist_t1", "doc_qa_large_dist_t0", "doc_qa_large_trials", "doc_qa_large_b8_t2", "doc_qa_large_b8_t1", "doc_qa_large_b8_t0", "doc_qa_large_eb8", "embed_batch", "doc_qa_large_t0", "doc_qa", "doc_qa_advanced_shipped", "doc_qa_naive_12_each", "doc_qa_naive_12_b8", "doc_qa_naive_12_shipped_t3", "doc_qa_naive_12_shipped_t2", "doc_qa_naive_12_shipped", "doc_qa_naive_12_memo", "doc_qa_naive_12", "stop_rules", "doc_qa_large", "doc_qa_refine_shipped", "doc_qa_refine", "doc_qa_quality_pooled", "doc_qa_quality_seed2", "doc_qa_quality_seed1", "doc_qa_quality_100", "doc_qa_quality", "prompts_100", "prompts_retrieved",
         "prompts_li_adv2", "prompts_teola_adv_b", "prompts_seed1", "prompts_li_adv", "prompts", "doc_qa_remote", "remote_overhead", "overlap", "rag", "load", "load_glibc_arenas", "engine_settings", "compile", "runtime", "prefix_ttft", "kv_swap", "programs_heavy_fcfs_swap", "programs_heavy_react", "programs_heavy", "programs_heavy_swap", "programs_vllm", "resume_fidelity", "kv_connector_probe", "kv_swap_resume", "programs",
         "length_predictor", "sim_fidelity_probe", "sim_fidelity_retime", "sim_fidelity_batch_curve", "sim_fidelity_seed1", "sim_fidelity_cal_systems", "sim_fidelity_replay_prompts", "sim_fidelity_prompts", "sim_fidelity_n12", "sim_fidelity_shuffled", "sim_fidelity_each", "step_shape_app", "step_shape_again", "step_shape", "sim_fidelity_memo", "sim_fidelity_device", "cost_forms", "sim_fidelity", "sim_fidelity_avx2", "sim_fidelity_avx2_cal12", "sim_fidelity_steps", "sim_fidelity_avx2_rep", "sim_trace_diff_load", "sim_trace_diff", "sim_trace_diff_avx2", "sim_speed", "sim_paper", "sim_paper_large", "sim_programs_sharegpt_deep", "sim_programs_mixed", "sim_programs_sharegpt", "sim_programs_sharegpt_auto", "sim_programs_lats", "sim_programs_fcfs", "sim_programs_fcfs_x4", "sim_programs_loads", "sim_programs_tree", "sim_programs_tree_auto", "sim_programs_chat_auto", "sim_programs_chat_x4", "sim_programs_tree_x4", "agent_real_paired", "agent_real", "lamps_real_high_request_order", "lamps_real_high_resume", "lamps_real_high", "lamps_real", "sim_lamps", "sim_lamps_predicted", "sim_lamps_infercept_check", "sim_lamps_fixcheck", "sim_lamps_sweep", "sim_lamps_memory", "plan_study",
         "plan_real"]
HEADER = """# Benchmarks

Every number here is measured side by side in one run on the machine named in each section, with the
command that reproduces it. Ratios compare teola with a baseline on the same engines in the same run.
Tests never assert timings; these scripts report them. Regenerate this file with `python -m bench.report`
after running the suites (each writes its section to `bench/results/<suite>.md`).

Sections whose title starts with SIMULATED are not measurements: they run teola's runtime on simulated
engines in virtual time (docs/simulator.md) with a profile whose provenance they name; the simulator's
own measured error on this machine is the "Simulator fidelity" section.
"""


def main() -> None:
    sections = []
    names = ORDER + sorted(p.stem for p in RESULTS.glob("*.md") if p.stem not in ORDER)
    for name in names:
        path = RESULTS / f"{name}.md"
        if path.exists():
            sections.append(path.read_text().strip())
    m = machine()
    text = HEADER + f"\nLast assembled at commit {m['commit']} on {m['cpu']} ({m['cores']} cores).\n\n"
    text += "\n\n".join(sections) + "\n"
    (ROOT / "BENCHMARKS.md").write_text(text)
    print(f"wrote BENCHMARKS.md with {len(sections)} sections")


if __name__ == "__main__":
    main()
