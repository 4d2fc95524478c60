"""Stop rules against run-on answers, measured offline on recorded replies (issue 22).

The document-QA runs decode greedily (temperature 0), so a call with a stop text or a smaller
max_tokens returns exactly a prefix of the reply the same call returned without it: the text before
the first stop text (vLLM leaves the stop text out), or the first k tokens. This script applies each
candidate rule to the replies `bench.studies.rag.doc_qa_quality` recorded, and reports per rule and system:
answer contains gold, token F1 (`bench.lib.quality`) and reply tokens (the LLM's own tokenizer, read from
the prepared model directory). No engine runs.

Rules are chosen on a development file and confirmed on a held-out one (`--dev`, `--held-out`): the
held-out file's questions never chose anything. A rule is worth shipping only if it keeps the
held-out count of gold answers and saves decode tokens.

Run: python -m bench stop_rules [--dev doc_qa_quality_seed1] [--held-out doc_qa_quality_seed2]
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.lib.quality import contains, token_f1, wilson
from bench.lib.results import results_dir, write_results
from bench.lib.tables import num, table
from bench.studies.rag.doc_qa_quality import held_out_queries

SENTENCE_STOPS = (". ", "! ", "? ", "\n")


def cut_at(text: str, stops: tuple[str, ...]) -> str:
    """What a call with these stop texts returns: the text before the first one (vLLM's default)."""
    ends = [i for i in (text.find(s) for s in stops) if i >= 0]
    return text[: min(ends)] if ends else text


def rules(tokenizer: Any) -> dict[str, Callable[[str], str]]:
    """name -> the reply that rule leaves of a greedy reply."""

    def cap(k: int) -> Callable[[str], str]:
        return lambda t: tokenizer.decode(tokenizer(t, add_special_tokens=False)["input_ids"][:k])

    return {
        "none (shipped)": lambda t: t,
        'stop "\\n\\n"': lambda t: cut_at(t, ("\n\n",)),
        'stop "\\n"': lambda t: cut_at(t, ("\n",)),
        "stop at the first sentence end": lambda t: cut_at(t, SENTENCE_STOPS),
        "max_tokens 64": cap(64),
        "max_tokens 48": cap(48),
        "max_tokens 32": cap(32),
    }


def gold_answers(data: dict[str, Any]) -> list[list[str]]:
    """The gold answers of a run's questions, in the run's order (its seed, n and exclusions)."""
    qs = held_out_queries(
        data["n"], 0, data["seed"], data.get("exclude_seeds") or [], data.get("exclude_n") or 0
    )
    return [q["answers"] for q in qs]


def evaluate(
    data: dict[str, Any], rule_fns: dict[str, Callable[[str], str]], tokenizer: Any
) -> dict[str, Any]:
    """{flow: {system: {rule: {"contains_k", "n", "f1", "tokens"}}}} for one results file."""
    gold = gold_answers(data)
    out: dict[str, Any] = {}
    for flow, row in data["runs"].items():
        for system, run in row.items():
            recs = run["records"]
            answers = gold[: len(recs)]
            cell = out.setdefault(flow, {}).setdefault(system, {})
            for name, fn in rule_fns.items():
                replies = [fn(r.get("reply") or "") if r.get("ok") else "" for r in recs]
                cell[name] = {
                    "n": len(recs),
                    "contains_k": sum(
                        bool(r.get("ok")) and contains(x, a) for r, x, a in zip(recs, replies, answers)
                    ),
                    "f1": sum(token_f1(x, a) for x, a in zip(replies, answers)) / len(recs),
                    "tokens": sum(len(tokenizer(x, add_special_tokens=False)["input_ids"]) for x in replies)
                    / len(recs),
                }
    return out


def markdown(data: dict[str, Any]) -> str:
    lines = [
        "## Stop rules against run-on answers, measured offline on recorded replies (issue 22)",
        "",
        f"Command: `{data['command']}`. " + (__doc__ or "").split("\n\n")[1].replace("\n", " "),
        "",
    ]
    rows = []
    for sample, res in data["samples"].items():
        for flow, row in res.items():
            for system, cell in row.items():
                base = cell["none (shipped)"]["tokens"] or 1.0
                for rule, r in cell.items():
                    lo, hi = wilson(r["contains_k"], r["n"])
                    rows.append(
                        [
                            sample,
                            flow,
                            system,
                            rule,
                            f"{r['contains_k']}/{r['n']} ({100 * lo:.0f}-{100 * hi:.0f}%)",
                            num(r["f1"], 3),
                            num(r["tokens"]),
                            f"{100 * (r['tokens'] / base - 1):+.0f}%",
                        ]
                    )
    lines += table(
        [
            "sample",
            "flow",
            "system",
            "rule",
            "answer contains gold (k/n, 95% interval)",
            "token F1",
            "reply tokens",
            "vs none",
        ],
        rows,
        "llllllrr",
    )
    return "\n".join(lines) + "\n"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of `python -m bench stop_rules`."""
    p.add_argument("--dev", default="doc_qa_quality_seed1", help="results file the rule is chosen on")
    p.add_argument("--held-out", default="doc_qa_quality_seed2", help="results file that confirms it")
    p.add_argument("--model-dir", default=None, help="tokenizer directory (default: the prepared SmolLM2)")
    p.add_argument("--out", default="stop_rules")


def run_cli(a: argparse.Namespace, argv: list[str], p: argparse.ArgumentParser) -> int:
    """Runs `python -m bench stop_rules` (argv: the options given, for its page)."""
    from transformers import AutoTokenizer

    from engines.assets.models import resolve_model

    tokenizer = AutoTokenizer.from_pretrained(a.model_dir or resolve_model("smollm2-135m-instruct"))
    fns = rules(tokenizer)
    samples = {}
    for label, name in (("dev", a.dev), ("held-out", a.held_out)):
        path = Path(name) if Path(name).exists() else results_dir("rag") / f"{name}.json"
        if not path.exists():
            print(
                f"bench.studies.rag.stop_rules: no results file {path}; run python -m bench doc_qa_quality "
                "first",
                file=sys.stderr,
            )
            return 2
        samples[f"{label} ({path.stem})"] = evaluate(json.loads(path.read_text()), fns, tokenizer)
    data = {"command": " ".join(["python -m bench stop_rules", *(argv)]).strip(), "samples": samples}
    write_results(a.out, data, markdown(data), subject="rag")
    return 0
