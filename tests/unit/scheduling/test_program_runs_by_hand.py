"""Program-aware LLM scheduling (Autellix) end to end on teola's runtime in virtual time (teola/sim): the
programs run through `teola.sim.program_runs.run_set` on one simulated LLM engine whose every iteration
lasts exactly 1 s (`SimLLM` cost {"base": 1.0}: prefill and batch size free), against hand-computed
completion times.

The runtime's timing rules these cases follow (engines/sim/llm.py, teola/runtime/engine_tier):
  R1  An iteration lasts 1 s and gives every request it runs one output token; a request sent to an
      idle engine starts at once.
  R2  An iteration's requests are fixed when the previous iteration ends, before the runtime hears that
      iteration's events: a call the runtime sends in reaction to them (a seat freed, a preemption)
      joins the iteration after, 1 s later.
  R3  A preempted call is aborted in the engine; the iteration it was fixed into still lasts its second
      (lost), and the call resumes later as its prompt + the tokens it decoded (none decoded again).
  R4  A program's next call is sent when its previous call ends; within a queue calls are served
      first-come first-served, and a demoted, promoted or newly arrived call joins its queue's tail.
  R5  The program policies charge decoded tokens as they stream (rerank_every=1) and preempt a running
      call when a waiting one is in a strictly better queue, the running call last in rank first."""

from __future__ import annotations

from engines.sim.llm import SimLLM
from teola import Engine
from teola.runtime import Runtime
from teola.sim.program_runs import run_set
from teola.sim.program_workloads import CallSpec, ProgramSpec
from teola.sim.virtual_loop import run_virtual

UNIT_QUEUES = {
    "num_queues": 64,
    "base_quantum": 1.0,
    "growth": 1.0,
    "beta": None,
    "rerank_every": 1,
    "service": "tokens",
}


def run_programs(
    programs: list[ProgramSpec], policy: str, options: dict | None = None, seats: int = 2
) -> tuple[dict[str, float], int]:
    """Each program's completion time (its last call's end) and the preemptions, on one simulated
    engine of `seats` running sequences and 1-second iterations."""

    async def main() -> dict:
        engine = SimLLM("llm", {"base": 1.0}, max_num_seqs=seats)
        rt = Runtime(
            {"llm": Engine("llm", kind="vllm", max_batch=seats)},
            {"llm": engine},
            policy=policy,
            policy_options={policy: options} if options else None,
        )
        await rt.start()
        try:
            return await run_set(rt, programs, policy, ["Why?"], keep_log=True)
        finally:
            await rt.stop()

    out = run_virtual(main())
    ends: dict[str, float] = {}
    for call in out["log"]:
        ends[call["program"]] = max(ends.get(call["program"], 0.0), call["end"])
    return ends, out["preemptions"]


def figure2() -> list[ProgramSpec]:
    """Autellix Figure 2: four programs at t=0, each call issued when the previous one ends; decode
    tokens per call A {4,3,1,1}, B {3,3,4}, C {1,2}, D {4}; an engine of 2 seats."""
    tokens = {"A": [4, 3, 1, 1], "B": [3, 3, 4], "C": [1, 2], "D": [4]}
    return [
        ProgramSpec(pid, 0.0, [CallSpec(1, n, (i - 1,) if i else ()) for i, n in enumerate(ns)])
        for pid, ns in tokens.items()
    ]


def test_figure2_fcfs_runs_the_calls_in_arrival_order():
    """FCFS, no preemption (X[a,b): call X decodes from a to b):
        A1[0,4) B1[0,3): both start at 0; C1, D1 wait.
        B1 ends 3 -> C1 sent, joins at 4 (R2) -> C1[4,5); B2 queues.
        A1 ends 4 -> D1 sent, joins at 5 -> D1[5,9); A2 queues.
        C1 ends 5 -> B2 (queued since 3) joins at 6 -> B2[6,9); C2 queues.
        D1, B2 end 9, the engine idles -> A2[9,12), C2[9,11) start at once (R1). D done 9.
        C2 ends 11 -> B3 joins at 12 -> B3[12,16). C done 11.
        A2 ends 12 -> A3 joins at 13 -> A3[13,14); A4 joins at 15 -> A4[15,16).
    Completion: D 9, C 11, A 16, B 16 (mean 13)."""
    ends, preempted = run_programs(figure2(), "fcfs")
    assert ends == {"D": 9.0, "C": 11.0, "A": 16.0, "B": 16.0} and preempted == 0


def test_figure2_plas_ranks_calls_by_their_programs_service():
    """PLAS with unit quanta: a call's queue is its program's decoded tokens (completed calls + its own
    so far). (n) = tokens of that call decoded before.
        0  A1 B1 run (Q0); C1 D1 wait (Q0).
        1  A1 B1 have 1 token (Q1): preempted for C1 D1 (Q0); [1,2) lost (R3); C1 D1 join at 2.
        3  C1 ends (C: 1). Seat -> A1(1) (Q1, first in line), joins 4. C2 queues (Q1). D1 has 1 (Q1).
        4  D1 has 2 (Q2), worse than B1 C2 (Q1): preempted; B1(1) sent, joins 5 -> B1[5,7).
        5  A1 has 2 (Q2), worse than C2: preempted; C2 sent, joins 6.
        7  B1 ends (B: 3); C2 has 1. Seat -> D1(2) (Q2, queued at 4, before A1 at 5), joins 8.
        8  C2 ends: C done 8. Seat -> A1(2), joins 9.
       10  D1 ends (2 more tokens): D done 10. Seat -> B2 (Q3), joins 11.
       11  A1 ends (A: 4). A2 (Q4) joins 12 -> A2[12,15).  B2[11,14).
       14  B2 ends (B: 6): B3 (Q6) joins 15 -> B3[15,19).
       15  A2 ends: A3 joins 16 -> [16,17); A4 joins 18 -> [18,19). No waiting call is in a better
           queue than a running one from 11 on: no more preemptions.
    Completion: C 8, D 10, A 19, B 19 (mean 14: one more than FCFS, each of the 4 preemptions
    losing its iteration); 4 preemptions."""
    ends, preempted = run_programs(figure2(), "plas", UNIT_QUEUES)
    assert ends == {"C": 8.0, "D": 10.0, "A": 19.0, "B": 19.0} and preempted == 4


def test_figure2_mlfq_keeps_demoting_program_d_behind_new_calls():
    """Program-blind MLFQ, quanta 1, 2, 4 tokens: a call's queue is its own decoded tokens, [0,1) Q0,
    [1,3) Q1, [3,7) Q2; every new call enters Q0. (n) = tokens of that call decoded before.
        1  A1 B1 have 1 (Q1): preempted for C1 D1 (Q0); C1 D1 join at 2.
        3  C1 ends. Seat -> A1(1) (Q1, in Q1 since 1). D1 has 1 (Q1). C2 arrives (Q0): the instance
           is full, D1 is last in rank (in Q1 since 3): preempted; C2 joins at 4 with A1.
        6  C2 ends: C done 6. A1 has 3 (Q2), worse than B1 D1 (Q1): preempted; B1(1), D1(1) join 7.
        9  B1 ends; D1 has 3 (Q2). Seat -> A1(3) (Q2 since 6). B2 arrives (Q0): D1 (Q2 since 9)
           preempted; A1, B2 join at 10.
       11  A1 ends (A1[10,11)). Seat -> D1(3); A2 arrives (Q0): D1 is last in rank, preempted at once
           (no token). A2 joins 12 -> A2[12,15).  B2[10,13).
       13  B2 ends. Seat -> D1(3), preempted at once again for B3 (Q0), which joins 14; B3 decodes 3
           tokens by 17 (Q2).
       15  A2 ends. Seat -> D1(3), preempted at once for A3, which joins 16 -> A3[16,17).
       17  A3 ends. Seat -> D1(3); A4 arrives (Q0). B3 (3 tokens: Q2 since 17) is last in rank, behind
           D1 (Q2 since 9): B3 preempted; A4, D1 join at 18 -> [18,19): A done 19, D done 19.
       19  B3(3) resumes on the idle engine (R1): [19,20), B done 20.
    Completion: C 6, A 19, D 19, B 20 (mean 16); 9 preemptions (2 + 1 + 1 + 1 + 1 + 1 + 1 + 1).
    D, which Autellix's figure shows held back by A's and B's new calls, ends last but one and is
    preempted 5 times; FCFS ends it at 9, PLAS at 10."""
    ends, preempted = run_programs(figure2(), "mlfq", {**UNIT_QUEUES, "growth": 2.0})
    assert ends == {"C": 6.0, "A": 19.0, "D": 19.0, "B": 20.0} and preempted == 9


def test_anti_starvation_promotes_a_long_program_past_a_stream_of_short_ones():
    """One long program L (one call of 3 tokens) at t=0 and 12 one-token programs s0..s11 arriving one
    a second from t=0, PLAS on a 1-seat engine, queues of 1, 2, 4, inf tokens.
    Without anti-starvation (beta None):
        0  L starts (it arrived first). 1: L has 1 token (Q1), s0 (Q0) preempts it; [1,2) lost, s0[2,3).
        3  s1 (arrived 1) runs [3,4) on the idle engine (R1), then each sk runs [k+2, k+3): s11 ends 14.
       14  L, last in line, decodes its 2 tokens: [14,16). L ends at 16.
    With beta = 1 (promote a call to Q0 when its program's waited over executed seconds reach 1; a
    preempted call waits from its preemption, teola.scheduling.program.policy `preempted`):
        1  L preempted as above (1 s executed, 0 waited): not promoted yet; s0[2,3).
        2  L has waited 1 s (1 to 2) for 1 s executed: promoted to Q0's tail, behind s1 (arrived 1) and
           ahead of s2, admitted after it in the same scheduling step; s1[3,4).
        4  L runs [4,5): 1 more token (1 in its queue since the promotion: Q1); s2, s3, s4 wait in Q0:
        5  L preempted ([5,6) lost) and promoted again at once (since its promotion it waited 2 s, 2 to 4,
           for 1 s executed), behind s5 (arrived 5): s2[6,7), s3[7,8),
           s4[8,9), s5[9,10).
       10  L decodes its last token [10,11): L ends at 11, while shorts still arrive; s6..s11 run
           [11,12) ... [16,17)."""
    progs = [ProgramSpec("L", 0.0, [CallSpec(1, 3)])]
    progs += [ProgramSpec(f"s{i}", float(i), [CallSpec(1, 1)]) for i in range(12)]
    opts = {"num_queues": 4, "base_quantum": 1.0, "growth": 2.0, "rerank_every": 1, "service": "tokens"}
    starved, _ = run_programs(progs, "plas", {**opts, "beta": None}, seats=1)
    rescued, preempted = run_programs(progs, "plas", {**opts, "beta": 1.0}, seats=1)
    assert starved["L"] == 16.0 and max(starved[f"s{i}"] for i in range(12)) == 14.0
    assert rescued["L"] == 11.0 and rescued["s11"] == 17.0 and preempted == 2
