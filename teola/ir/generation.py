"""LLM generation settings every call starts from (a node's config, a `Program.call` keyword or a
request overrides them), taken from the engine requests' one table of defaults."""

from __future__ import annotations

from engines.requests import REQUEST_DEFAULTS

GEN_KEYS = ("max_tokens", "temperature", "stop")
DEFAULT_GEN: dict[str, object] = {k: REQUEST_DEFAULTS[k] for k in GEN_KEYS}

MAX_TOKENS_LIMIT = 32_768  # far above any context window shipped; stops absurd budgets early
MAX_TEMPERATURE = 2.0
MAX_STOPS = 16


def check_gen(gen: dict[str, object], where: str) -> dict[str, object]:
    """Raise ValueError naming `where` for generation settings an engine would reject."""
    mt = gen.get("max_tokens")
    if not isinstance(mt, int) or isinstance(mt, bool) or not 1 <= mt <= MAX_TOKENS_LIMIT:
        raise ValueError(f"{where}: max_tokens must be an int in [1, {MAX_TOKENS_LIMIT}], got {mt!r}")
    t = gen.get("temperature")
    if not isinstance(t, (int, float)) or isinstance(t, bool) or not 0 <= t <= MAX_TEMPERATURE:
        raise ValueError(f"{where}: temperature must be a number in [0, {MAX_TEMPERATURE}], got {t!r}")
    stop = gen.get("stop")
    stops = [stop] if isinstance(stop, str) else stop
    if stop is not None and not (
        isinstance(stops, list) and len(stops) <= MAX_STOPS and all(isinstance(x, str) and x for x in stops)
    ):
        raise ValueError(
            f"{where}: stop must be a non-empty text or a list of at most {MAX_STOPS} of them, got {stop!r}"
        )
    return gen
