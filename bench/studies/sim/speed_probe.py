"""The machine's speed during a benchmark against the profile it is simulated with: a reference LLM
decode batch, one of the profile's own shapes (PROBE: 4 prompts of 30 words, each decoding 40
tokens), timed by its streamed iteration before and after each real trace. On a shared VM the speed
moves between a profile and the traces measured minutes later (bench/results/sim/sim_fidelity_retime.md);
the probe tells that drift from the simulator's own error. It reports; it never rescales the model."""

from __future__ import annotations

from typing import Any

from bench.lib.tables import NONE, num, table

PROBE = (4, 30, 40)  # batch, prompt words, output tokens
BAND = 0.10  # a trace whose probes are both within this of the profile's step ran at its speed


async def probe(app: Any, salt: int) -> float | None:
    """Seconds of one decode iteration of PROBE on the app's LLM engine (None: no LLM engine, or
    too few streamed tokens to read the step)."""
    from teola.sim.profile_batches import decode_step

    names = [n for n, spec in app.engines.items() if spec.kind == "vllm"]
    if not names:
        return None
    steps = await decode_step(app.runtime.instances[names[0]][0].handle, *PROBE, salt=salt)
    return float(steps["step_s"]) if steps else None


def profile_step(profile: dict[str, Any]) -> float | None:
    """The profile's own measured step for PROBE's shape (its short-prompt batch of 4 decoding 40)."""
    for r in profile.get("engines", {}).get("vllm", {}).get("fit", {}).get("steps") or []:
        if r["batch"] == PROBE[0] and r["out_tokens"] == PROBE[2] and (r.get("prompt_tokens") or 0) < 200:
            return float(r["measured_s"])
    return None


def probe_lines(probes: dict[str, list[float | None]], reference: float | None) -> list[str]:
    """Markdown: each trace's probes before and after it, against the profile's step."""
    if not probes or not reference:
        return []
    lines = [
        "",
        f"Machine speed during the real traces: a decode batch of the profile's shape ({PROBE[0]} prompts "
        f"of {PROBE[1]} words decoding {PROBE[2]} tokens) timed before and after each trace, against the "
        f"profile's {reference * 1e3:.1f} ms per step (bench/studies/sim/speed_probe.py):",
        "",
    ]
    inside, rows = 0, []
    for key, (before, after) in probes.items():
        ratios = [x / reference for x in (before, after) if x]
        inside += bool(ratios) and len(ratios) == 2 and all(abs(r - 1) <= BAND for r in ratios)
        rows.append(
            [
                key.replace("|", " / "),
                num(before * 1e3) if before else NONE,
                num(after * 1e3) if after else NONE,
                " / ".join(f"{r:.2f}x" for r in ratios) or NONE,
            ]
        )
    lines += table(["trace", "before (ms)", "after (ms)", "vs the profile"], rows, "lrrl")
    lines += [
        "",
        f"{inside} of {len(probes)} traces ran with both probes within {BAND:.0%} of the profile's step.",
    ]
    return lines
