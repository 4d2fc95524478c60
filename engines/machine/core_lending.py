"""Who computes on which cores when engines share a CPU: the rule of teola's core lending.

Every engine that shares the machine's cores has home cores (engines/tuning/settings.py: vLLM on
cores 1..C-1, the sentence-transformers models on core 0). An engine that has work while every
other sharing engine is idle borrows all the cores; as soon as another has work too, each computes
on its home cores again. One query alone thus runs each of its steps on the whole machine, and
under load the engines keep the split that measured best for concurrent work
(bench/results/rag/core_lending.md).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence, Set


def lent_cores(
    name: str, busy: Set[str], homes: Mapping[str, Sequence[int]], all_cores: Sequence[int]
) -> list[int]:
    """The cores engine `name` computes on: all of `all_cores` when it is the only engine of
    `homes` with work (`busy`) and at least one other engine shares the cores (alone in the
    process it keeps its home: it cannot know what else runs on the machine), else its home."""
    if name not in homes:
        raise KeyError(f"engine {name!r} does not share cores here (sharing: {sorted(homes)})")
    others_busy = any(other in busy for other in homes if other != name)
    if len(homes) > 1 and not others_busy:
        return sorted(all_cores)
    return sorted(homes[name])
