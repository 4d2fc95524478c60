"""Offline jobs: an app template over a data set, read from a JSON or YAML file (docs/planning.md).

    {"name": "ensemble", "app": "ensembling",            # ensembling | routing | chain_summary | mix |
                                                         # app_queries | program_runs
     "dataset": "truthfulqa", "requests": 1000,          # questions (ensembling, routing)
     "models": {"a": {"profile": "a100-llama2-7b", "max_tokens": 256, "lengths": "answer"}, ...},
     "answerers": ["a", "b"], "fuser": "c",              # ensembling: every answerer answers,
                                                         # the fuser combines
     "routes": {"a": 0.7, "b": 0.3},                     # routing: share of the requests each model gets
     "summariser": "s", "evaluator": "e",                # chain_summary over "documents" of "dataset"
     "documents": 100, "chunk_words": 300, "max_chunks": null, "evaluations": 2,
     "parts": [{...}, {...}],                            # mix: sub-jobs planned together on the same GPUs
     "target": "naive_rag", "queries": 40,               # app_queries: N queries of a teola app
                                                         # (teola.plan.app_job)
     "steps_profile": "cpu-smollm2-135m", "samples": 8, "query": {...}, "config": {...}, "simulate": null,
     "program": "mod:fn", "runs": 40,                    # program_runs (with "target"): N runs of a Program
                                                         # (teola.plan.program_job)
     "lengths": "lengths-smollm2-135m",                  # recorded output lengths (teola.plan.lengths)
     "seed": 0}

A model entry: "profile" (default: the command line's --profile), "max_tokens" (default 256),
"lengths" (which recorded stage's lengths it samples; default its stage), and "engine" (options of
the real engine for `teola run-job`, e.g. {"temperature": 0.8}). An app_queries job's models are
the app's LLM engines, by engine name; its "steps_profile" (default --profile) sizes the queries'
calls and non-LLM steps, "samples" queries are recorded, "query" / "config" replace the app's
sample query / add query config, and "simulate": PROFILE runs every engine of the app as that
profile's simulated engine in `teola run-job` (teola.plan.app_job).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

APPS = ("ensembling", "routing", "chain_summary", "mix", "app_queries", "program_runs")
_MODEL_KEYS = {"profile", "max_tokens", "lengths", "engine"}


@dataclass
class ModelSpec:
    name: str
    profile: str | None
    max_tokens: int = 256
    lengths: str | None = None
    engine: dict[str, Any] = field(default_factory=dict)


@dataclass
class Job:
    """A validated job (see the module docstring); `parts` holds a mix's sub-jobs."""

    name: str
    app: str
    spec: dict[str, Any]
    models: dict[str, ModelSpec]
    parts: list[Job] = field(default_factory=list)
    lengths: Any = None
    seed: int = 0


def read_job(path: str | Path) -> dict[str, Any]:
    """The raw dict of a job file (.json, .yaml or .yml)."""
    p = Path(path)
    if not p.is_file():
        raise ValueError(f"job file {str(path)!r} not found")
    text = p.read_text(encoding="utf-8")
    if p.suffix in (".yaml", ".yml"):
        try:
            import yaml  # PyYAML: installed with vLLM (the cpu extra); JSON needs nothing
        except ImportError:
            raise ValueError(
                f"job file {p}: reading YAML needs PyYAML (`pip install pyyaml`), or write the job as JSON"
            ) from None
        return yaml.safe_load(text)
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"job file {p}: not valid JSON ({e})") from None


def parse_job(data: dict[str, Any], where: str = "job") -> Job:
    """Validate a job dict; ValueError naming the field and the fix."""
    if not isinstance(data, dict):
        raise ValueError(f"{where}: a job is a JSON object, got {type(data).__name__}")
    app = data.get("app")
    if app not in APPS:
        raise ValueError(f"{where}: 'app' must be one of {', '.join(APPS)}, got {app!r}")
    name = str(data.get("name", app))
    seed = int(data.get("seed", 0))
    if app == "mix":
        parts = [parse_job(p, f"{where}.parts[{i}]") for i, p in enumerate(data.get("parts") or [])]
        if len(parts) < 2:
            raise ValueError(f"{where}: a mix needs 'parts', a list of at least two sub-jobs")
        if any(part.app in ("app_queries", "program_runs") for part in parts):
            raise ValueError(
                f"{where}: a mix's parts are offline job kinds; app_queries and program_runs jobs "
                "run alone (run-job runs them through their app)"
            )
        models: dict[str, ModelSpec] = {}
        for part in parts:
            clash = set(models) & set(part.models)
            if clash:
                raise ValueError(
                    f"{where}: model names must differ between the parts of a mix; {sorted(clash)} repeat"
                )
            models.update(part.models)
        return Job(name, app, data, models, parts, data.get("lengths"), seed)
    models = _models(data.get("models"), where)
    _check_roles(app, data, models, where)
    return Job(name, app, data, models, [], data.get("lengths"), seed)


def load_job(path: str | Path) -> Job:
    return parse_job(read_job(path), str(path))


def _models(raw: Any, where: str) -> dict[str, ModelSpec]:
    if not isinstance(raw, dict) or not raw:
        raise ValueError(f'{where}: \'models\' must map model names to {{"profile": ..., "max_tokens": ...}}')
    out = {}
    for name, m in raw.items():
        m = m or {}
        unknown = set(m) - _MODEL_KEYS
        if unknown:
            raise ValueError(
                f"{where}: model {name!r} has unknown keys {sorted(unknown)}; known: {sorted(_MODEL_KEYS)}"
            )
        max_tokens = m.get("max_tokens", 256)
        if not isinstance(max_tokens, int) or max_tokens < 1:
            raise ValueError(
                f"{where}: model {name!r}: max_tokens must be a positive int, got {max_tokens!r}"
            )
        out[name] = ModelSpec(
            name, m.get("profile"), max_tokens, m.get("lengths"), dict(m.get("engine") or {})
        )
    return out


def _check_roles(app: str, data: dict[str, Any], models: dict[str, ModelSpec], where: str) -> None:
    def known(role: str, value: Any) -> None:
        if value not in models:
            raise ValueError(
                f"{where}: {role} {value!r} is not one of the job's models ({', '.join(models)})"
            )

    if app == "ensembling":
        answerers = data.get("answerers")
        if not isinstance(answerers, list) or not answerers:
            raise ValueError(f"{where}: ensembling needs 'answerers', a list of model names")
        for a in answerers:
            known("answerer", a)
        if data.get("fuser") is not None:
            known("fuser", data["fuser"])
    elif app == "routing":
        routes = data.get("routes")
        if not isinstance(routes, dict) or not routes or any(float(v) <= 0 for v in routes.values()):
            raise ValueError(f"{where}: routing needs 'routes', {{model: positive share}}")
        for m in routes:
            known("route", m)
    elif app in ("app_queries", "program_runs"):
        _check_app_queries(data, where)
    else:
        known("summariser", data.get("summariser"))
        if data.get("evaluator") is not None:
            known("evaluator", data["evaluator"])
    if app in ("ensembling", "routing") and not isinstance(data.get("requests"), int):
        raise ValueError(f"{where}: 'requests' (how many questions of the dataset) must be an int")


def _check_app_queries(data: dict[str, Any], where: str) -> None:
    if not isinstance(data.get("target"), str) or not data["target"]:
        raise ValueError(
            f"{where}: {data['app']} needs 'target', a shipped app's name (e.g. naive_rag) or module:attr"
        )
    if data["app"] == "program_runs":
        if not isinstance(data.get("program"), str) or ":" not in data["program"]:
            raise ValueError(
                f"{where}: program_runs needs 'program', module:function of an async program(target, i)"
            )
        if not isinstance(data.get("runs"), int) or data["runs"] < 1:
            raise ValueError(f"{where}: 'runs' (how many runs of the program) must be an int >= 1")
    elif not isinstance(data.get("queries"), int) or data["queries"] < 1:
        raise ValueError(f"{where}: 'queries' (how many queries of the app) must be an int >= 1")
    if "samples" in data and (not isinstance(data["samples"], int) or data["samples"] < 1):
        raise ValueError(f"{where}: 'samples' (queries recorded to size the calls) must be an int >= 1")
    for key in ("query", "config"):
        if data.get(key) is not None and not isinstance(data[key], dict):
            raise ValueError(f"{where}: {key!r} must be a JSON object")
