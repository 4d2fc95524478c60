"""An LLM call that pauses for tools, as a template component (kind "agent"; LAMPS §2): the model
writes `<tool>{"name": ..., "arguments": {...}}</tool>` (teola.compile.tool_syntax), its segment stops there,
the tool engine runs the call, and the same call continues with the result appended to its
context, up to `max_rounds` tool calls: a ReAct loop in one call. The rounds are unrolled when the
query compiles, so the graph stays static (Teola §4):

    seg0.prefill -> seg0.decode -> round0.test -> round0.tool -> seg1.decode -> round1.test -> ...
    every segment's text -> answer (aggregate "first", last segment first)

A round's condition lets the rest run only when its segment wrote a tool call; the answer is the
text of the last segment that ran. The segments of one query's call share one "kv_key" (the
query's namespace and the node), so the LLM engine and its policy see one request pausing: the
"pause_kv" handling (preserve / discard / swap) applies between segments, LAMPS ranks the segments
as one request, and each continuation re-sends prompt + everything written so far, which vLLM's
prefix cache mostly holds. Each round's tool primitive names the LLM engine ("api_of"), whose
policy learns the tool's duration when it ends (`Policy.observe_api`, as `Program.call_with_tools`
feeds it). A tool call that cannot be parsed, names a tool outside `tools` or fails
in the tool engine comes back to the model as "error: ..." in its result; the query goes on.

config: "tool_engine" (a registered engine of kind "tool", required), "tools" (the names the model
may call, required), "max_rounds" (tool calls at most, 1-8, default 2), "handling" (what the LLM
engine does with the call's KV during a tool call: "discard" (default), "preserve", "swap", or "auto":
INFERCEPT's least-waste choice, made by the engine's scheduler when each segment is queued,
teola.scheduling.program.pause_handling),
"parts" (as the llm component's; default the question), "instruction" (default
teola.compile.tool_syntax.TOOL_INSTRUCTION listing `tools`), "examples" (worked calls placed after the
instruction), "start" (text the model's turn begins with, e.g. '<tool>{"name": "' to make the first
segment a tool call: a model too small to follow the instruction, such as SmolLM2-135M, then
completes the call), and the generation settings of each segment.

A query may narrow `tools` to a subset of the app's and change the other options, but never
`tool_engine`, `instruction`, `examples` or `parts`: those are the app's (teola.compile.components.narrowing).
"""

from __future__ import annotations

from dataclasses import dataclass

from teola.compile.components.context import BuildContext, Port
from teola.compile.components.llm import prompt_parts
from teola.compile.components.llm_primitives import gen_args
from teola.compile.components.narrowing import app_only, narrowed_tools
from teola.compile.tool_syntax import CLOSE, OPEN, TOOL_INSTRUCTION, expected_tool
from teola.ir.ops import PrimOp
from teola.ir.primitive import Primitive


@dataclass(frozen=True)
class _Call:
    """What every segment of the agent's one call shares."""

    engine: str
    tool_engine: str
    tools: list[str]
    parts: list[tuple[str, object]]
    reads: tuple[str, ...]
    gen: dict
    stops: list[str]
    pause: dict


def decompose_agent(ctx: BuildContext) -> None:
    tool_engine, tools = _tools(ctx)
    rounds = ctx.int_config("max_rounds", 2, maximum=8)
    handling = ctx.config.get(
        "handling", "discard"
    )  # AgentOptions checked it is discard, preserve, swap or auto
    gen = gen_args(ctx.config, f"node {ctx.node.name!r}")
    parts = _parts(ctx, tools)
    engine = ctx.engine()
    call = _Call(
        engine=engine,
        tool_engine=tool_engine,
        tools=tools,
        parts=parts,
        reads=tuple(dict.fromkeys(src.key for _, src in parts if not isinstance(src, str))),
        gen=gen,
        stops=[gen["stop"]] if isinstance(gen["stop"], str) else list(gen["stop"] or []),
        pause={"kv_node": ctx.node.name, "pause_kv": handling, "api": expected_tool(tools)},
    )
    texts = [_first_segment(ctx, call)]
    results: list[str] = []
    for r in range(rounds):
        _round(ctx, call, r, last=r == rounds - 1, texts=texts, results=results)
    answer = ctx.add(
        Primitive(
            PrimOp.AGGREGATE,
            None,
            ctx.node.name,
            inputs=tuple(reversed(texts)),
            outputs=(ctx.key("text"),),
            args={"mode": "first"},
            label="answer",
        )
    )
    ctx.sub.exports["text"] = Port(answer.outputs[0])


def _first_segment(ctx: BuildContext, call: _Call) -> str:
    """seg0: the prompt's prefill and the decode up to the first tool call; its text's key."""
    kv = ctx.key("seg0.kv")
    ctx.add(
        Primitive(
            PrimOp.PREFILLING,
            call.engine,
            ctx.node.name,
            inputs=call.reads,
            outputs=(kv,),
            args={"parts": list(call.parts)},
            label="seg0.prefill",
        )
    )
    start = ctx.config.get("start") or ""
    return ctx.add(
        Primitive(
            PrimOp.DECODING,
            call.engine,
            ctx.node.name,
            inputs=(kv,),
            outputs=(ctx.key("seg0.text"),),
            args={
                **call.gen,
                "stop": call.stops + [CLOSE],
                **call.pause,
                **({"start": start} if start else {}),
            },
            label="seg0.decode",
        )
    ).outputs[0]


def _round(ctx: BuildContext, call: _Call, r: int, last: bool, texts: list[str], results: list[str]) -> None:
    """Round r: the test for a tool call in the last segment, the tool, and the segment that continues
    after its result (appended to `texts` and `results`). The last round's segment does not pause."""
    branch = ctx.add(
        Primitive(
            PrimOp.CONDITION,
            None,
            ctx.node.name,
            inputs=(texts[r],),
            outputs=(ctx.key(f"round{r}.branch"),),
            args={"predicate": "contains", "value": OPEN, "case_sensitive": True},
            label=f"round{r}.test",
        )
    ).outputs[0]
    results.append(
        ctx.add(
            Primitive(
                PrimOp.TOOL,
                call.tool_engine,
                ctx.node.name,
                inputs=(texts[r], branch),
                outputs=(ctx.key(f"round{r}.result"),),
                args={"guard": branch, "parse": "tag", "allowed": call.tools, "api_of": call.engine},
                label=f"round{r}.tool",
            )
        ).outputs[0]
    )
    args = {
        **call.gen,
        "stop": call.stops if last else call.stops + [CLOSE],
        **({} if last else call.pause),
        "kv_node": ctx.node.name,
        "parts": list(call.parts),
        "continuation": [list(texts), list(results)],
        "tools": call.tools,
    }
    texts.append(
        ctx.add(
            Primitive(
                PrimOp.DECODING,
                call.engine,
                ctx.node.name,
                inputs=call.reads + tuple(texts) + tuple(results),
                outputs=(ctx.key(f"seg{r + 1}.text"),),
                args=args,
                label=f"seg{r + 1}.decode",
            )
        ).outputs[0]
    )


def _tools(ctx: BuildContext) -> tuple[str, list[str]]:
    name = ctx.config.get("tool_engine")
    if not isinstance(name, str) or ctx.engine_kinds.get(name) != "tool":
        tool_engines = sorted(n for n, k in ctx.engine_kinds.items() if k == "tool")
        raise ValueError(
            f"config.nodes.{ctx.node.name}.tool_engine: must name a registered engine of kind 'tool' "
            f"(registered: {tool_engines or 'none'}), got {name!r}"
        )
    tools = ctx.config.get("tools")
    if not isinstance(tools, list) or not tools or not all(isinstance(t, str) and t for t in tools):
        raise ValueError(
            f"config.nodes.{ctx.node.name}.tools: must list the tool names the model may call, got {tools!r}"
        )
    app_only(ctx, "tool_engine", "instruction", "examples", "parts")
    return name, narrowed_tools(ctx)


def _parts(ctx: BuildContext, tools: list[str]) -> list[tuple[str, object]]:
    instruction = ctx.config.get("instruction") or TOOL_INSTRUCTION.format(tools=", ".join(tools))
    head = [("instruction", instruction)]
    if ctx.config.get("examples"):
        head.append(("examples", ctx.config["examples"]))
    return head + prompt_parts(ctx, ctx.config.get("parts") or [["question", "$query.question"]])
