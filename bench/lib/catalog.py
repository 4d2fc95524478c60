"""The table of studies: every benchmark `python -m bench STUDY [options]` runs, with its module, its
subject, one line of what it measures and whether it needs the real engines (vLLM, sentence-transformers,
PostgreSQL; a SIMULATED study needs none). docs/benchmarks.md lists every study of this table."""

from __future__ import annotations

from dataclasses import dataclass

import bench.lib.tables as tables


@dataclass(frozen=True)
class Study:
    """One study: `module` (under bench/) defines add_arguments(parser) and run_cli(args, argv, parser),
    or, with `main`, main(argv) parses its own options."""

    name: str
    module: str
    subject: str
    measures: str
    engines: bool
    main: bool = False


SUBJECTS = {
    "rag": "end-to-end RAG and document QA against the baselines",
    "remote": "apps whose latency comes from remote services; deployments",
    "programs": "program-level scheduling, LAMPS and calls that pause for tools",
    "kv": "preemption and KV swap on vLLM",
    "sim": "the simulator: faithfulness, profiles, speed and the papers' scale",
    "plan": "offline planning",
    "overheads": "engines, runtime and server overheads",
}

S = Study
STUDIES: tuple[Study, ...] = (
    S(
        "rag",
        "studies.rag.rag",
        "rag",
        "teola vs the Teola paper's baselines and LlamaIndex, latency vs rate",
        True,
        main=True,
    ),
    S(
        "doc_qa",
        "studies.rag.doc_qa",
        "rag",
        "document QA, teola vs LlamaIndex on their defaults: latency, LLM work, quality",
        True,
    ),
    S(
        "doc_qa_quality",
        "studies.rag.doc_qa_quality",
        "rag",
        "answer quality and retrieval recall on many questions",
        True,
    ),
    S(
        "doc_qa_trials",
        "studies.rag.doc_qa_trials",
        "rag",
        "pools separate doc_qa runs into trials with spread and verdicts",
        False,
    ),
    S("prompts", "studies.rag.prompts", "rag", "candidate synthesis prompts, each measured", True),
    S(
        "stop_rules",
        "studies.rag.stop_rules",
        "rag",
        "stop rules against run-on answers, offline on recorded replies",
        False,
    ),
    S(
        "remote_apps",
        "studies.remote.remote_apps",
        "remote",
        "search-augmented generation and a tool agent vs LlamaIndex, LangGraph",
        True,
    ),
    S(
        "remote_services",
        "lib.remote_services",
        "remote",
        "the loopback stand-ins for remote services alone",
        False,
    ),
    S(
        "deploy",
        "studies.remote.deploy",
        "remote",
        "teola vs LangGraph vs LlamaIndex at equal work, the LLM emulated",
        True,
    ),
    S(
        "client_cpu",
        "studies.remote.client_cpu",
        "remote",
        "client CPU per query on the remote path, profiled",
        True,
    ),
    S(
        "programs",
        "studies.programs.programs",
        "programs",
        "SIMULATED: program policies and balancers on the runtime in virtual time",
        False,
    ),
    S(
        "programs_vllm",
        "studies.programs.programs_vllm",
        "programs",
        "program-level scheduling on real vLLM",
        True,
    ),
    S(
        "programs_heavy",
        "studies.programs.programs_heavy",
        "programs",
        "heavy-tailed programs on real vLLM, 3 trials",
        True,
    ),
    S(
        "lamps_real",
        "studies.programs.lamps_real",
        "programs",
        "LAMPS vs FCFS + INFERCEPT vs SJF on real engines",
        True,
    ),
    S(
        "agent_real",
        "studies.programs.agent_real",
        "programs",
        "the ReAct agent app under the three policies",
        True,
    ),
    S(
        "length_predictor",
        "studies.programs.length_predictor",
        "programs",
        "how well the length predictor predicts",
        True,
    ),
    S(
        "record_lengths",
        "studies.programs.record_lengths",
        "programs",
        "records the real engine's output lengths (its trace)",
        True,
    ),
    S(
        "kv_swap",
        "studies.kv.kv_swap",
        "kv",
        "swap time of N scattered KV blocks: native kernel vs loops",
        False,
    ),
    S(
        "kv_swap_resume",
        "studies.kv.kv_swap_resume",
        "kv",
        "resume time of a preempted call: KV swap vs recompute",
        True,
    ),
    S(
        "resume_fidelity",
        "studies.kv.resume_fidelity",
        "kv",
        "does a resumed greedy call give the same tokens?",
        True,
    ),
    S("sim_fidelity", "studies.sim.sim_fidelity", "sim", "the RAG benchmark measured vs simulated", True),
    S(
        "sim_trace_diff",
        "studies.sim.sim_trace_diff",
        "sim",
        "where the simulator's time differs, primitive by primitive",
        True,
    ),
    S("step_shape", "studies.sim.step_shape", "sim", "a vLLM decode step against batch size", True),
    S(
        "cost_forms",
        "studies.sim.cost_forms",
        "sim",
        "decode-step cost forms against stored profiles (offline)",
        False,
    ),
    S(
        "gpu_profiles",
        "studies.sim.gpu_profiles",
        "sim",
        "derived vs measured-operator GPU profiles per iteration (offline)",
        False,
    ),
    S(
        "gpu_profile_validation",
        "studies.sim.gpu_profile_validation",
        "sim",
        "SIMULATED: measured GPU profiles vs published end-to-end figures",
        False,
    ),
    S("sim_speed", "studies.sim.sim_speed", "sim", "how fast the simulator is", False),
    S("sim_paper", "studies.sim.sim_paper", "sim", "SIMULATED: Teola Fig. 8-10 on GPU profiles", False),
    S("sim_paper_plots", "studies.sim.sim_paper_plots", "sim", "PNG plots of a sim_paper result file", False),
    S(
        "sim_programs",
        "studies.sim.sim_programs",
        "sim",
        "SIMULATED: program scheduling at Autellix's scale",
        False,
    ),
    S("sim_autellix", "studies.sim.sim_autellix", "sim", "SIMULATED: Autellix Fig. 12 at its set-up", False),
    S(
        "sim_steady",
        "studies.sim.sim_steady",
        "sim",
        "SIMULATED: Autellix / LAMPS set-ups at steady state, past the knee",
        False,
    ),
    S("sim_lamps", "studies.sim.sim_lamps", "sim", "SIMULATED: LAMPS vs INFERCEPT vs SJF", False),
    S(
        "sim_lamps_paper",
        "studies.sim.sim_lamps_paper",
        "sim",
        "SIMULATED: LAMPS' Fig. 6 at its set-up vs INFERCEPT and vLLM",
        False,
    ),
    S(
        "sim_lamps_profile",
        "studies.sim.sim_lamps_profile",
        "sim",
        "the GPT-J 6B profile of LAMPS' set-up from measured operators",
        False,
    ),
    S(
        "plan_study",
        "studies.plan.plan_study",
        "plan",
        "SIMULATED: the planner vs its heuristics at 8 GPUs",
        False,
    ),
    S("plan_real", "studies.plan.plan_real", "plan", "teola plan + teola run-job on real engines", True),
    S(
        "plan_lengths",
        "studies.plan.plan_lengths",
        "plan",
        "records the offline apps' output lengths (the planner's eCDFs)",
        True,
    ),
    S(
        "plan_sharegpt_lengths",
        "studies.plan.plan_sharegpt_lengths",
        "plan",
        "ShareGPT's reply lengths, for plan_study",
        False,
    ),
    S(
        "compile",
        "studies.overheads.compile",
        "overheads",
        "compile + optimize time of one advanced-RAG query",
        False,
    ),
    S(
        "runtime_overhead",
        "studies.overheads.runtime_overhead",
        "overheads",
        "scheduler overhead and batching policies (test engines)",
        False,
    ),
    S(
        "prefix_ttft",
        "studies.overheads.prefix_ttft",
        "overheads",
        "time to first token with and without a partial prefill",
        True,
    ),
    S(
        "overlap",
        "studies.overheads.overlap",
        "overheads",
        "expansion and indexing overlapped vs in turn",
        True,
    ),
    S(
        "pass_gate",
        "studies.overheads.pass_gate",
        "overheads",
        "cost-gated passes: predicted gain vs measured, pass on vs off",
        True,
    ),
    S(
        "embed_batch",
        "studies.overheads.embed_batch",
        "overheads",
        "the embedder's batch efficiency by chunk length",
        True,
    ),
    S(
        "engine_settings",
        "studies.overheads.engine_settings",
        "overheads",
        "vLLM process layout and thread placement",
        True,
    ),
    S("load", "studies.overheads.load", "overheads", "many concurrent queries over HTTP on loopback", True),
    S(
        "ray_overhead",
        "studies.overheads.ray_overhead",
        "overheads",
        "per-primitive overhead of the Ray executor",
        False,
    ),
    S(
        "remote_overhead",
        "studies.overheads.remote_overhead",
        "overheads",
        "per-call overhead of the LLM behind `vllm serve`",
        True,
    ),
    S(
        "tenant_flood",
        "studies.overheads.tenant_flood",
        "overheads",
        "a flooding tenant and a steady one, per-tenant limits",
        True,
    ),
    S(
        "hostile_mix",
        "studies.overheads.hostile_mix",
        "overheads",
        "hostile clients, a well-behaved tenant, /healthz and memory",
        True,
    ),
)
BY_NAME = {s.name: s for s in STUDIES}


def listing() -> str:
    """The table `python -m bench list` prints: study, subject, engines, what it measures."""
    width = max(len(s.name) for s in STUDIES)
    lines = [f"{'study':<{width}}  {'subject':<9}  engines  measures"]
    lines += [
        f"{s.name:<{width}}  {s.subject:<9}  {'yes' if s.engines else 'no':<7}  {s.measures}" for s in STUDIES
    ]
    return "\n".join(lines)


def markdown_table() -> str:
    """The table of studies as docs/benchmarks.md holds it (`python -m bench list --markdown`)."""
    rows = [[f"`{s.name}`", s.subject, "yes" if s.engines else "no", s.measures] for s in STUDIES]
    return "\n".join(tables.table(["study", "subject", "engines", "measures"], rows))
