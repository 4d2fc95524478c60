"""The shared shape of every LLM call: the Prefilling and Decoding primitives over named prompt parts."""

from __future__ import annotations

from typing import Any

from teola.compile.components.context import BuildContext, Port
from teola.ir.generation import DEFAULT_GEN, GEN_KEYS, check_gen
from teola.ir.ops import PrimOp
from teola.ir.primitive import Primitive
from teola.ir.refs import Ref


def gen_args(config: dict[str, Any], where: str = "generation settings", **defaults: Any) -> dict[str, Any]:
    """The generation settings of a call: defaults < `config`'s; ValueError naming `where` if bad."""
    out = {**DEFAULT_GEN, **defaults}
    out.update({k: config[k] for k in GEN_KEYS if k in config})
    return check_gen(out, where)


def llm_call(
    ctx: BuildContext,
    label: str,
    parts: list[tuple[str, str | Ref]],
    out_name: str,
    gen: dict[str, Any],
    split: str | None = None,
    n_items: int = 0,
) -> tuple[Primitive, Primitive, Port]:
    """Add Prefilling -> Decoding for one call. Prompt parts are (name, literal text or Ref) in
    prompt order. A `split` call ("list" or "jsonl") writes a list of up to `n_items` items."""
    engine = ctx.engine()
    reads = tuple(dict.fromkeys(r.key for _, r in parts if isinstance(r, Ref)))
    kv = ctx.key(f"{label}.kv")
    prefill = ctx.add(
        Primitive(
            PrimOp.PREFILLING,
            engine,
            ctx.node.name,
            inputs=reads,
            outputs=(kv,),
            args={"parts": list(parts)},
            label=f"{label}.prefill",
        )
    )
    out = ctx.key(out_name)
    args: dict[str, Any] = dict(gen)
    if split:
        args.update(split=split, n_items=n_items)
    decode = ctx.add(
        Primitive(
            PrimOp.DECODING,
            engine,
            ctx.node.name,
            inputs=(kv,),
            outputs=(out,),
            args=args,
            label=f"{label}.decode",
        )
    )
    return prefill, decode, Port(out, n_items if split else 0)
