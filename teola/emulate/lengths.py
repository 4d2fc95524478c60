"""How many tokens an emulated call writes when its client did not ask for an exact count.

A request with `ignore_eos` decodes exactly `max_tokens` tokens, as vLLM does. Without it the call
stops at an emulated end of sequence: its length is drawn from `OutputLengths`, capped by
`max_tokens`. The draw is a pure function of the seed, the request's own `seed` and its prompt
token ids, so the same prompt always gets the same length (like a greedy decode) whatever else the
server is doing, and a trace replays to the same lengths in the emulator and in the simulator.

Specs (`teola emulate --output-len SPEC`):

    max                 no end of sequence: every call writes max_tokens (the default)
    fixed:N             N tokens
    uniform:LO,HI       an integer in [LO, HI], uniformly
    exponential:MEAN    exponential with this mean (rounded, at least 1)
    lognormal:MEDIAN,SIGMA   log-normal with this median and shape (rounded, at least 1)
    FILE.json           a JSON list of observed lengths (their empirical distribution)
"""

from __future__ import annotations

import array
import json
import math
import random
import zlib
from collections.abc import Sequence
from pathlib import Path

SPEC_HELP = (
    "max | fixed:N | uniform:LO,HI | exponential:MEAN | lognormal:MEDIAN,SIGMA | FILE.json "
    "(a list of observed lengths)"
)


class OutputLengths:
    """A length distribution parsed from a spec (see the module docstring); `draw` picks one length."""

    def __init__(self, spec: str = "max", seed: int = 0) -> None:
        self.spec = spec
        self.seed = seed
        self.kind, self.params, self.values = _parse(spec)

    def draw(self, prompt_ids: Sequence[int], max_tokens: int, request_seed: int | None = None) -> int:
        """The length of a call with these prompt ids, in [1, max_tokens]."""
        if self.kind == "max":
            return max_tokens
        key = zlib.crc32(
            array.array("q", prompt_ids).tobytes(), zlib.crc32(f"{self.seed}:{request_seed}".encode())
        )
        rng = random.Random(key)
        if self.kind == "fixed":
            n = self.params[0]
        elif self.kind == "uniform":
            n = rng.randint(int(self.params[0]), int(self.params[1]))
        elif self.kind == "exponential":
            n = rng.expovariate(1.0 / self.params[0])
        elif self.kind == "lognormal":
            n = rng.lognormvariate(math.log(self.params[0]), self.params[1])
        else:
            n = self.values[int(rng.random() * len(self.values))]
        return max(1, min(max_tokens, round(n)))


def _parse(spec: str) -> tuple[str, tuple[float, ...], list[int]]:
    """(kind, numbers, observed lengths) of a spec; ValueError naming the accepted forms."""
    text = str(spec).strip()
    if text == "max":
        return "max", (), []
    if text.endswith(".json"):
        return "file", (), _observed(Path(text))
    kind, _, rest = text.partition(":")
    arity = {"fixed": 1, "uniform": 2, "exponential": 1, "lognormal": 2}.get(kind)
    try:
        params = tuple(float(x) for x in rest.split(",")) if rest else ()
    except ValueError:
        params = ()
    if arity is None or len(params) != arity or any(not p > 0 for p in params):
        raise ValueError(f"--output-len {spec!r}: expected {SPEC_HELP}, with positive numbers")
    if kind == "uniform" and params[0] > params[1]:
        raise ValueError(f"--output-len {spec!r}: uniform:LO,HI needs LO <= HI")
    return kind, params, []


def _observed(path: Path) -> list[int]:
    try:
        values = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ValueError(f"--output-len {path}: cannot read a JSON list of lengths ({exc})") from None
    if not isinstance(values, list) or not values or not all(isinstance(v, int) and v >= 1 for v in values):
        raise ValueError(f"--output-len {path}: expected a non-empty JSON list of token counts >= 1")
    return sorted(values)
