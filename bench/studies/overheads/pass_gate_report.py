"""The page of `python -m bench pass_gate`: per app and pass, the predicted gain beside the measured
effect, the LLM work of each side, and the costs the prediction used."""

from __future__ import annotations

import statistics
from typing import Any

from bench.lib.tables import machine_facts, num, table


def costs_line(app: str, costs: dict[str, Any] | None) -> str:
    if not costs:
        return f"- {app}: the LLM reported no costs (predicted with the named profile)"
    return (
        f"- {app}: {costs['source']}: request {costs['request_s'] * 1e3:.1f} ms, prefill "
        f"{costs['prefill_token_s'] * 1e3:.2f} ms/token, decode {costs['decode_step_s'] * 1e3:.1f} ms/step, "
        f"block {costs['block_size']}, fit error {costs.get('error', 0):.0%}, probe "
        f"{costs.get('probe_s', 0):.2f} s"
    )


def side_work(rows: list[dict[str, Any]], side: str) -> str:
    """Mean prompt / output tokens and LLM requests of one side."""

    def mean(key: str) -> float:
        return statistics.fmean(r[side][key] for r in rows)

    return f"{mean('prompt_tokens'):.0f} / {mean('output_tokens'):.0f} / {mean('llm_requests'):.1f}"


def summary_rows(data: dict[str, Any]) -> list[list[Any]]:
    cells = []
    for app, result in data["apps"].items():
        for pass_name, rows in result["passes"].items():
            s = data["summaries"][app][pass_name]
            cells.append(
                [
                    app,
                    pass_name,
                    s["n"],
                    f"{s['gate_applies']} of {s['n']}",
                    num(s["predicted_s"], 3),
                    num(s["effect_s"], 3),
                    f"{s['sign_agrees']} of {s['n']}",
                    num(s["on_latency"], 2),
                    num(s["off_latency"], 2),
                    side_work(rows, "on"),
                    side_work(rows, "off"),
                ]
            )
    return cells


def query_rows(data: dict[str, Any]) -> list[list[Any]]:
    cells = []
    for app, result in data["apps"].items():
        for pass_name, rows in result["passes"].items():
            for i, r in enumerate(rows):
                calls = (
                    "; ".join(
                        f"{g['call']} {'on' if g['applies'] else 'off'} {g['gain_s']:+.3f}"
                        for g in r["gates"]
                    )
                    or "no call it applies to"
                )
                cells.append(
                    [
                        app,
                        pass_name,
                        i,
                        calls,
                        num(r["on"]["latency"], 2),
                        num(r["off"]["latency"], 2),
                        num(r["effect_s"], 3),
                    ]
                )
    return cells


def markdown(data: dict[str, Any]) -> str:
    sim = data.get("simulated")
    label = "SIMULATED (virtual time on a profile's engines): " if sim else ""
    lines = [
        f"## {label}Cost-gated passes: predicted gain vs measured effect, pass on vs off",
        "",
        f"Command: `{data['command']}`. {machine_facts(data['machine'])}",
        "",
        "Predicted: the pass's cost model (teola/passes/*_cost.py, docs/passes.md) on the LLM's costs, "
        "summed over the query's calls, read back from the e-graph's `# gate` lines. Measured: latency with "
        "the pass off minus on (positive: the pass saves time), each query alone after one unmeasured run of "
        "it (prefix cache primed), the two sides alternating which runs first. A pass with no call to apply "
        "to runs the same graph on both sides: its row is the noise floor. 'gate applies': queries where the "
        "gate would turn the pass on. Work per side: prompt / output tokens / LLM requests (equal work: "
        "equal tokens).",
        "",
        "Costs the predictions used:",
        "",
    ]
    lines += [costs_line(app, r["costs"]) for app, r in data["apps"].items()]
    lines += [""] + table(
        [
            "app",
            "pass",
            "n",
            "gate applies",
            "predicted (s)",
            "measured (s)",
            "signs agree",
            "on (s)",
            "off (s)",
            "work on",
            "work off",
        ],
        summary_rows(data),
    )
    lines += ["", "Per query (each call: whether the gate applies the pass, predicted gain in s):", ""]
    lines += table(["app", "pass", "query", "calls", "on (s)", "off (s)", "measured (s)"], query_rows(data))
    return "\n".join(lines) + "\n"
