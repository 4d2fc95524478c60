"""A real run's LLM lengths, recorded and replayed on simulated apps (bench/studies/sim/sim_fidelity.py and
sim_trace_diff.py): each query's output and prompt lengths by kind, a simulated LLM that replays them,
the apps started on a profile's simulated engines in virtual time, and the profile's prompt-token
estimate calibrated against the real prompts."""

from __future__ import annotations

import copy
import re
from typing import Any

from bench.lib.workloads import app_query
from bench.studies.rag.rag_setup import SYSTEMS, make_apps
from teola.sim.profiler import add_lengths


class ReplayLengths:
    """A simulated LLM's lengths replaying a real run: each call whose prompt holds one of the recorded
    questions decodes that question's next recorded output length of its kind ("text" / "split", in
    the order the real calls started) and, where the run recorded them (under "prompts", by kind in
    the same order), takes the prompt length that call had; other calls go to `fallback` (a
    LengthSampler). outputs=False: prompt lengths only, output lengths drawn by `fallback`."""

    def __init__(self, per_question: dict[str, dict[str, Any]], fallback: Any, outputs: bool = True) -> None:
        self.left = {_marker(q): copy.deepcopy(kinds) for q, kinds in per_question.items()}
        self.fallback, self.outputs = fallback, outputs

    def _recorded(self, key: str) -> dict[str, Any]:
        return next((kinds for marker, kinds in self.left.items() if marker in key), {})

    def prompt_tokens(self, kind: str, key: str) -> int | None:
        left = self._recorded(key).get("prompts", {}).get(kind)
        return left.pop(0) if left else None

    def sample(self, kind: str, key: str, max_tokens: int) -> int:
        left = self._recorded(key).get(kind) if self.outputs else None
        if left:
            return max(1, min(max_tokens, left.pop(0)))
        return self.fallback.sample(kind, key, max_tokens)


def _marker(question: str) -> str:
    """The question's opening words up to its first character that repr() could escape."""
    return re.match(r"[A-Za-z0-9 ,?]*", question).group(0)[:40]


def call_lengths(trace_: list[dict[str, Any]]) -> dict[str, Any]:
    """One query's LLM output lengths by kind, in the order its calls started; under "prompts" the
    same calls' prompt lengths by kind, and under "prompt" its decoding calls' prompt tokens summed."""
    out: dict[str, Any] = {"text": [], "split": []}
    ordered = sorted(trace_, key=lambda t: (t.get("started") or 0.0, t["primitive"]))
    add_lengths(out, ordered)
    out["prompts"] = {"text": [], "split": []}
    add_lengths(out["prompts"], ordered, field="num_prompt_tokens")
    out["prompt"] = [prompt_tokens(trace_)]
    return out


def use_replay(app: Any, per_question: dict[str, dict[str, Any]] | None, outputs: bool = True) -> None:
    """Give the app's simulated LLMs a ReplayLengths over these lengths (None: their own sampler)."""
    for inst in app.runtime.instances["llm"]:
        base = getattr(inst.handle.sampler, "fallback", inst.handle.sampler)
        inst.handle.sampler = base if per_question is None else ReplayLengths(per_question, base, outputs)


async def lengths_of(
    app: Any, queries: list[dict[str, Any]], prompts: list[int] | None = None, system: str = "teola"
) -> dict[str, list[int]]:
    """Output lengths by kind of the queries' LLM calls run as `system` does (bench.studies.rag.rag's
    SYSTEMS); `prompts` collects each decode's prompt tokens."""
    config, policy = SYSTEMS[system]
    app.runtime.set_policy(policy)
    out: dict[str, list[int]] = {"text": [], "split": []}
    for q in queries:
        tr = (await app.run(app_query(q), {**config, "policy": policy})).trace
        add_lengths(out, tr)
        if prompts is not None:
            prompts.append(prompt_tokens(tr))
    return out


def prompt_tokens(trace_: list[dict[str, Any]]) -> int:
    """Prompt tokens of a query's decoding calls (each call once: not the prefill fused into it)."""
    return sum(
        int(t.get("num_prompt_tokens") or 0)
        for t in trace_
        if t.get("op") in ("decoding", "partial_decoding") and "fused_into" not in t
    )


def calibrate_tokens(
    profile: dict[str, Any], names: tuple[str, ...], cal: list[dict[str, Any]], real: list[int]
) -> float:
    """Scale the profile's prompt-token estimate (token_ratio, template_tokens) so the calibration
    queries' simulated prompts have as many tokens as they had on the real engines (a profile's ratio
    comes from its own prose: 1.24 tokens per counted word, where BoolQ passages have 1.14).
    Returns the scale applied."""

    async def body(apps: dict[str, Any]) -> list[int]:
        out: list[int] = []
        for app in apps.values():
            await lengths_of(app, cal, out)
        return out

    simulated = on_simulated_apps(names, profile, body)
    scale = sum(real) / max(1, sum(simulated))
    scale_tokens(profile, scale)
    return scale


def scale_tokens(profile: dict[str, Any], scale: float) -> None:
    """Multiply the profile's prompt-token estimate (token_ratio, template_tokens) by `scale`."""
    llm = profile["engines"]["vllm"]
    llm["token_ratio"] = round(llm["token_ratio"] * scale, 4)
    llm["template_tokens"] = round(llm["template_tokens"] * scale)


def on_simulated_apps(names: tuple[str, ...], profile: dict[str, Any], body: Any) -> Any:
    """`await body(apps)` with the named apps started on the profile's simulated engines, in virtual time."""
    from teola.sim.run import use_profile
    from teola.sim.virtual_loop import run_virtual

    apps = make_apps(names)
    for app in apps.values():
        use_profile(app, profile)

    async def scenario() -> Any:
        for app in apps.values():
            await app.start()
        try:
            return await body(apps)
        finally:
            for app in apps.values():
                await app.stop()

    return run_virtual(scenario())
