"""The graph IR shared by p-graphs and e-graphs: primitives over a networkx DiGraph."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field

import networkx as nx

from engines.llm_text.costs import EngineCosts
from engines.machine.op_costs import OpCost
from teola.ir.ops import CONTROL_OPS, PrimOp
from teola.ir.primitive import Primitive
from teola.ir.refs import Ref


class GraphError(ValueError):
    """A graph broke an invariant checked by `Graph.lint()`."""


@dataclass(frozen=True, slots=True)
class EngineInfo:
    """What compilation needs to know of an engine: its kind, the ops it runs, batch limits and,
    for LLM engines, the context window (tokens per request, 0 = unknown); remote: its work runs
    behind an HTTP API elsewhere (an adapter given `url=`), so it takes no compute from this machine;
    ranks_by: what its scores rank by (`engines.registry.kind_ranks_by`; "" = unknown); costs and
    op_costs: what the started engine reported (an LLM's EngineCosts; another engine's seconds per
    request and per item of each op, EngineProfile.op_costs), empty before it started."""

    kind: str
    ops: frozenset[PrimOp]
    max_efficient_batch: int = 16
    token_budget: int = 0
    context_window: int = 0
    remote: bool = False
    ranks_by: str = ""
    costs: EngineCosts | None = None
    # left out of the hash (a dict), not of equality: caches keyed by an EngineInfo still tell them apart
    op_costs: Mapping[PrimOp, OpCost] = field(default_factory=dict, kw_only=True, hash=False)


@dataclass(slots=True)
class Graph:
    """A dataflow graph of primitives.

    `inputs` are the object-store keys the query itself provides (question, chunks, namespace);
    `outputs` are the keys that make up the query's answer. Primitive ids come from a per-graph
    counter. Edges are ordering constraints; after dependency pruning they are exactly the data
    dependencies (producer of a key -> reader of it).
    """

    inputs: frozenset[str] = frozenset()
    outputs: tuple[str, ...] = ()
    engines: dict[str, EngineInfo] = field(default_factory=dict)
    components: tuple[str, ...] = ()  # the template's nodes, including any a pass left without primitives
    nx: nx.DiGraph = field(default_factory=nx.DiGraph)
    # what a cost-gated pass decided where it knew the engine's costs: "<pass> <label>" -> decision
    gates: dict[str, str] = field(default_factory=dict)
    _next_id: int = 0

    # ---- construction -------------------------------------------------------------------
    def add(self, prim: Primitive) -> Primitive:
        prim.id = self._next_id
        self._next_id += 1
        self.nx.add_node(prim.id, prim=prim)
        return prim

    def connect(self, src: int | Primitive, dst: int | Primitive) -> None:
        u, v = _id(src), _id(dst)
        if u != v:
            self.nx.add_edge(u, v)

    def disconnect(self, src: int | Primitive, dst: int | Primitive) -> None:
        self.nx.remove_edge(_id(src), _id(dst))

    def remove(self, prim: int | Primitive) -> None:
        self.nx.remove_node(_id(prim))

    def copy(self) -> Graph:
        """A deep copy of the structure with cloned primitives (same ids)."""
        g = Graph(
            inputs=self.inputs,
            outputs=self.outputs,
            engines=self.engines,
            components=self.components,
            gates=dict(self.gates),
            _next_id=self._next_id,
        )
        for pid, data in self.nx.nodes(data=True):
            p = data["prim"].clone()
            p.id = pid
            p.depth = data["prim"].depth
            g.nx.add_node(pid, prim=p)
        g.nx.add_edges_from(self.nx.edges(data=True))
        return g

    # ---- queries ------------------------------------------------------------------------
    def __getitem__(self, pid: int) -> Primitive:
        return self.nx.nodes[pid]["prim"]

    def __len__(self) -> int:
        return self.nx.number_of_nodes()

    def __iter__(self) -> Iterator[Primitive]:
        return iter(self.primitives)

    @property
    def primitives(self) -> list[Primitive]:
        """All primitives in a stable topological order (ties broken by id)."""
        order = nx.lexicographical_topological_sort(self.nx)
        return [self[i] for i in order]

    def parents(self, prim: int | Primitive) -> list[Primitive]:
        return [self[i] for i in sorted(self.nx.predecessors(_id(prim)))]

    def children(self, prim: int | Primitive) -> list[Primitive]:
        return [self[i] for i in sorted(self.nx.successors(_id(prim)))]

    def producers(self) -> dict[str, int]:
        """key -> id of the primitive that writes it."""
        out: dict[str, int] = {}
        for pid in self.nx.nodes:
            for k in self[pid].outputs:
                out[k] = pid
        return out

    def consumers(self, key: str) -> list[Primitive]:
        return [p for p in self.primitives if key in p.inputs]

    def find(self, op: PrimOp | None = None, component: str | None = None) -> list[Primitive]:
        return [
            p
            for p in self.primitives
            if (op is None or p.op == op) and (component is None or p.component == component)
        ]

    # ---- invariants ---------------------------------------------------------------------
    def lint(self) -> None:
        """Check the graph: acyclic; every key read is provided by the query or written by exactly
        one primitive with an edge from writer to reader; every primitive's engine is registered
        and supports its op; prompt-part references are among the inputs. Raises GraphError."""
        if not nx.is_directed_acyclic_graph(self.nx):
            cycle = nx.find_cycle(self.nx)
            raise GraphError(f"graph has a cycle: {' -> '.join(self[u].name for u, _ in cycle)}")
        writers: dict[str, int] = {}
        for p in self.primitives:
            for k in p.outputs:
                if k in writers:
                    raise GraphError(f"key {k!r} is written by both {self[writers[k]].name} and {p.name}")
                if k in self.inputs:
                    raise GraphError(f"key {k!r} is a query input but {p.name} writes it")
                writers[k] = p.id
        for p in self.primitives:
            for k in p.inputs:
                if k in self.inputs:
                    continue
                if k not in writers:
                    raise GraphError(f"{p.name} ({p.op}) reads {k!r}, which nothing writes")
                if not self.nx.has_edge(writers[k], p.id):
                    raise GraphError(
                        f"{p.name} reads {k!r} from {self[writers[k]].name} but has no edge from it"
                    )
            for part in p.args.get("parts", ()):
                src = part[1]
                if isinstance(src, Ref) and src.key not in p.inputs:
                    raise GraphError(
                        f"{p.name}: prompt part {part[0]!r} refers to {src.key!r}, not among its inputs"
                    )
            for k in p.args.get("map", ()):
                if k not in p.inputs:
                    raise GraphError(f"{p.name}: maps over {k!r}, not among its inputs")
            if p.op in CONTROL_OPS:
                if p.engine is not None:
                    raise GraphError(f"{p.name}: control op {p.op} runs on no engine, got {p.engine!r}")
                continue
            if p.engine is None:
                raise GraphError(f"{p.name}: op {p.op} needs an engine")
            if self.engines:
                info = self.engines.get(p.engine)
                if info is None:
                    raise GraphError(f"{p.name}: engine {p.engine!r} is not registered")
                if p.op not in info.ops:
                    raise GraphError(f"{p.name}: engine {p.engine!r} ({info.kind}) does not support {p.op}")
        for k in self.outputs:
            if k not in writers and k not in self.inputs:
                raise GraphError(f"graph output {k!r} is written by nothing")

    def assign_depths(self) -> None:
        """Depth by reverse topological order (Teola Algorithm 2, Event 1): sinks are 0 and a
        parent is one deeper than its deepest child."""
        for pid in reversed(list(nx.topological_sort(self.nx))):
            succ = list(self.nx.successors(pid))
            self[pid].depth = 1 + max(self[s].depth for s in succ) if succ else 0

    # ---- text forms ---------------------------------------------------------------------
    def _numbering(self) -> dict[int, int]:
        return {p.id: i for i, p in enumerate(self.primitives)}

    def to_text(self) -> str:
        """A stable text form, one primitive a line in topological order, e.g.
        `%3 = llm.partial_prefilling() :: synthesis.call0 reads[query.question] writes[...] [depth=4 n=1]`.
        Numbering is by position, so equal graphs print equally whatever their ids."""
        num = self._numbering()
        lines = []
        for p in self.primitives:
            parents = ", ".join(f"%{num[q.id]}" for q in sorted(self.parents(p), key=lambda q: num[q.id]))
            engine = p.engine or "ctl"
            extra = _args_text(p)
            lines.append(
                f"%{num[p.id]} = {engine}.{p.op.value}({parents}) :: {p.name}"
                f" reads[{', '.join(p.inputs)}] writes[{', '.join(p.outputs)}]"
                f"{extra} [depth={p.depth} n={p.num_requests}]"
            )
        if self.outputs:
            lines.append(f"return {', '.join(self.outputs)}")
        lines.extend(f"# gate {key}: {decision}" for key, decision in sorted(self.gates.items()))
        return "\n".join(lines)

    __str__ = to_text

    def to_dot(self) -> str:
        """Graphviz DOT text."""
        num = self._numbering()
        out = ["digraph egraph {", "  rankdir=LR;", "  node [shape=box, fontname=Helvetica];"]
        for p in self.primitives:
            out.append(
                f'  n{num[p.id]} [label="%{num[p.id]} {p.op.value}\\n{p.name}\\n'
                f'{p.engine or "control"} d={p.depth}"];'
            )
        for u, v in sorted((num[a], num[b]) for a, b in self.nx.edges):
            out.append(f"  n{u} -> n{v};")
        out.append("}")
        return "\n".join(out)

    def to_mermaid(self) -> str:
        """Mermaid flowchart text."""
        num = self._numbering()
        out = ["flowchart LR"]
        for p in self.primitives:
            out.append(f'  n{num[p.id]}["{p.op.value}<br/>{p.name}"]')
        for u, v in sorted((num[a], num[b]) for a, b in self.nx.edges):
            out.append(f"  n{u} --> n{v}")
        return "\n".join(out)


def _id(p: int | Primitive) -> int:
    return p.id if isinstance(p, Primitive) else p


def _args_text(p: Primitive) -> str:
    bits = []
    if "parts" in p.args:
        shown = p.args["parts"][: p.args.get("upto", len(p.args["parts"]))]
        bits.append("parts[" + ", ".join(name for name, _ in shown) + "]")
    if "slice" in p.args:
        a, b = p.args["slice"]
        bits.append(f"slice[{a}:{b}]")
    if "item" in p.args:
        bits.append(f"item[{p.args['item']}]")
    if "mode" in p.args:
        bits.append(f"mode={p.args['mode']}")
    return (" " + " ".join(bits)) if bits else ""


def iter_refs(parts: Iterable[tuple[str, object]]) -> Iterator[Ref]:
    for _, src in parts:
        if isinstance(src, Ref):
            yield src
