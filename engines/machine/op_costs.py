"""The per-op costs a non-LLM engine reports at start (`EngineProfile.op_costs`, plain data): for
each op it runs, a request's fixed seconds and one item's, so that a request of n items costs

    seconds = base_s + n * item_s

(an item: one request of a batch: a text embedded, a pair scored, a search run). They come from a
profile named in the engine's option `costs` (its `op_cost` table for the engine's kind: `base`
and `per_item`), or are fitted at start by a short probe through the engine's own `execute`: after
warm-up batches of 1 and 8 items, batches of 1, 2, 4 and 8 items twice each; the fastest of each
size (the slower one lost the shared cores to other work) is fitted by non-negative least squares
on relative errors (engines.llm_text.least_squares), each item's text unique so no cache answers
it. The fit's mean absolute relative error and the probe's own time are kept. On this machine's 2
shared CPU cores the probe takes 0.2 to 0.4 s for the MiniLM reranker; 0.15 to 0.25 s for the
embedder after 0.3 to 0.5 s of warm-up batches (a freshly loaded model's first batches, which its
first queries would pay otherwise); 15 to 30 ms per op for pgvector (55 ms with its scratch table);
60 to 100 ms for the text search. Passes gate the requests they add on these
(teola.passes.engine_costs)."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import statistics
import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engines.llm_text.costs import FITTED, PROFILE_DIR
from engines.llm_text.least_squares import nnls

PROBE_SIZES = (1, 2, 4, 8, 1, 2, 4, 8)  # items per probe batch; each size's fastest is fitted
WARM_UP_SIZES = (1, 8)  # items per warm-up batch, not timed (the first batches of a shape run slower)

# a salt as long as the probe's own (f"probe {nonce} {j}"), to measure a probe item's characters
SAMPLE_SALT = "probe 00000000 0"
# runs one batch of `n` probe items, each unique (salted), through the engine's `execute`
ProbeRun = Callable[[int, str], Awaitable[Any]]


@dataclass(frozen=True, slots=True, kw_only=True)
class OpCost:
    """base_s: seconds a request of the op costs beyond its items; item_s: seconds per item; source:
    "fitted at start" or the profile's name; error: the fit's mean absolute relative error over its
    samples (0 for a profile); probe_s: seconds the probe took; item_chars: the characters of text in
    one probe item (0: not measured, an item then costs item_s whatever its length)."""

    base_s: float
    item_s: float
    source: str
    error: float = 0.0
    probe_s: float = 0.0
    item_chars: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> OpCost:
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})

    def item_seconds(self, chars: int) -> float:
        """One item's seconds, scaled by its `chars` of text against the probe's items (a text
        model's time grows with the tokens it reads: a 1,000-character chunk costs about ten of the
        probe's short sentences); item_s where either length is unknown (0)."""
        if self.item_chars > 0 and chars > 0:
            return self.item_s * chars / self.item_chars
        return self.item_s

    def describe(self) -> str:
        fit = f", fit error {self.error:.0%}" if self.source == FITTED else ""
        return f"{self.source}{fit}: request {self.base_s * 1e3:.2f} ms, item {self.item_s * 1e3:.2f} ms"


def profile_op_table(profile: str, kind: str) -> dict[str, OpCost]:
    """The `op_cost` table of an engine of `kind` in a shipped profile (by name) or a profile file
    (by path), by op name ({} where the profile has none)."""
    path = Path(profile) if Path(profile).is_file() else PROFILE_DIR / f"{profile}.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        table = data["engines"][kind]["op_cost"]
        source = str(data.get("name", profile))
        return {
            str(op): OpCost(
                base_s=float(c["base"]),
                item_s=float(c["per_item"]),
                source=source,
                item_chars=float(c.get("item_chars", 0.0)),
            )
            for op, c in table.items()
        }
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return {}


def check_op_costs_option(name: str, kind: str, ops: frozenset[str], costs: Any) -> bool | str:
    """A non-LLM adapter's option `costs`, named as the LLM's (engines.llm_text.costs): True (fit
    them at start), False (report none) or a profile (its name or file) whose `op_cost` table has one
    of the engine's ops for its kind, read now so a wrong name fails at once."""
    if isinstance(costs, bool):
        return costs
    if isinstance(costs, str) and costs:
        if not set(profile_op_table(costs, kind)) & {str(op) for op in ops}:
            raise ValueError(
                f"engine {name!r}: option costs: profile {costs!r} gives no op costs of kind {kind!r} "
                f"for {', '.join(sorted(str(op) for op in ops))}; give true (fit at start), false or "
                f"a profile of {PROFILE_DIR}"
            )
        return costs
    raise ValueError(f"engine {name!r}: option costs must be true, false or a profile name, got {costs!r}")


def fit_op_cost(samples: list[tuple[int, float]], probe_s: float) -> OpCost:
    """(items, seconds) per probe batch -> the op's costs."""
    rows = [[1.0, float(n)] for n, _ in samples]
    y = [s for _, s in samples]
    base_s, item_s = nnls(rows, y, relative=True)
    errors = [abs(base_s + item_s * r[1] - t) / t for r, t in zip(rows, y) if t > 0]
    return OpCost(
        base_s=base_s,
        item_s=item_s,
        source=FITTED,
        error=round(statistics.fmean(errors), 4),
        probe_s=round(probe_s, 4),
    )


async def probe_op_cost(
    run: ProbeRun, sizes: tuple[int, ...] = PROBE_SIZES, warm_up: tuple[int, ...] = WARM_UP_SIZES
) -> OpCost:
    """Run warm-up batches, then time a batch of each of `sizes` items, and fit each size's fastest
    (the others had the shared cores taken by other work more than the engine's own cost)."""
    clock = asyncio.get_running_loop().time
    nonce = uuid.uuid4().hex[:8]
    began = clock()
    for w, n in enumerate(warm_up):
        await run(n, f"warm {nonce} {w}")
    fastest: dict[int, float] = {}
    for j, n in enumerate(sizes):
        t = clock()
        await run(n, f"probe {nonce} {j}")
        fastest[n] = min(clock() - t, fastest.get(n, float("inf")))
    return fit_op_cost(sorted(fastest.items()), clock() - began)


async def engine_op_costs(
    name: str,
    kind: str,
    option: bool | str,
    runs: Mapping[str, ProbeRun],
    sizes: tuple[int, ...] = PROBE_SIZES,
    warm_up: tuple[int, ...] = WARM_UP_SIZES,
    item_chars: Mapping[str, float] | None = None,
) -> dict[str, dict[str, Any]]:
    """What a non-LLM adapter puts in `profile.op_costs` once started, by op name: a named profile's
    op costs, the probe's fit of each op in `runs` (option True: batches of `sizes` items after
    batches of `warm_up`; `item_chars`: the characters of text in one of its items, by op), or {}
    (False: none reported)."""
    option = check_op_costs_option(name, kind, frozenset(runs), option)
    if option is False:
        return {}
    if isinstance(option, str):
        return {op: c.as_dict() for op, c in profile_op_table(option, kind).items() if op in runs}
    chars = item_chars or {}
    return {
        op: dataclasses.replace(
            await probe_op_cost(run, sizes, warm_up), item_chars=chars.get(op, 0.0)
        ).as_dict()
        for op, run in runs.items()
    }


def request_chars(body: Mapping[str, Any]) -> int:
    """The characters of text a request carries (its string fields: a text, a query and its text)."""
    return sum(len(v) for v in body.values() if isinstance(v, str))


def probe_words(i: int, salt: str) -> str:
    """A short sentence, unique by `salt` and `i` from its first word on."""
    return f"{salt} {i}: the river carries cold water past old stone mills near a market town"
