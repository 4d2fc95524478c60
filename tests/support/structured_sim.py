"""`StructuredSim`: the deterministic simulated LLM of the door tests, declaring structured outputs and
logprobs as vLLM does. A request constrained to a JSON schema ("json_schema") is answered with an
example object of the schema (first choices, `$ref`s followed), one constrained to "json_object"
with {"answer": <its usual text>}; with "logprobs" each output word gets a logprob and its top
alternatives."""

from __future__ import annotations

import json
import re
from typing import Any

from engines.protocol import Feature
from engines.sim.sim_engine import SimEngine, words

SCALARS = {"string": "text", "integer": 1, "number": 1.5, "boolean": True, "null": None}


def example(schema: dict[str, Any], defs: dict[str, Any] | None = None) -> Any:
    """An instance of `schema` (the first option wherever it offers several)."""
    defs = defs if defs is not None else schema.get("$defs", {})
    if "$ref" in schema:
        return example(defs[schema["$ref"].rsplit("/", 1)[-1]], defs)
    if "const" in schema:
        return schema["const"]
    if schema.get("enum"):
        return schema["enum"][0]
    for key in ("anyOf", "oneOf", "allOf"):
        if schema.get(key):
            return example(schema[key][0], defs)
    kind = schema.get("type", "object")
    kind = kind[0] if isinstance(kind, list) else kind
    if kind == "object":
        return {name: example(sub, defs) for name, sub in (schema.get("properties") or {}).items()}
    if kind == "array":
        return [example(schema.get("items") or {"type": "string"}, defs)]
    return SCALARS[kind]


class StructuredSim(SimEngine):
    def __init__(self, name: str, **kw: Any) -> None:
        super().__init__(name, **kw)
        self.profile.features = frozenset({Feature.STRUCTURED_OUTPUTS, Feature.LOGPROBS})

    def _decode(self, r: dict[str, Any]) -> dict[str, Any]:
        out = super()._decode(r)
        if r.get("json_schema") is not None:
            out = {**out, "text": json.dumps(example(r["json_schema"]))}
        elif r.get("json_object"):
            out = {**out, "text": json.dumps({"answer": out["text"]})}
        if r.get("logprobs") is not None:
            out["logprobs"] = [
                token_logprob(piece, r["logprobs"]) for piece in re.findall(r"\S+\s*", out["text"])
            ]
        return {**out, "num_output_tokens": max(1, len(words(out["text"])))}


def token_logprob(token: str, top: int) -> dict[str, Any]:
    """A made-up logprob of `token` with `top` alternatives (itself first)."""
    alternatives = [(token, -0.25)] + [(f"alt{k}", -1.0 - k) for k in range(1, top)]
    return {
        "token": token,
        "logprob": -0.25,
        "bytes": list(token.encode()),
        "top_logprobs": [
            {"token": t, "logprob": lp, "bytes": list(t.encode())} for t, lp in alternatives[:top]
        ],
    }
