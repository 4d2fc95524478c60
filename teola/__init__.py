"""teola: serve LLM applications as optimized primitive-level dataflow graphs."""

from teola.api.app import App
from teola.compile.compiler import Compiled
from teola.compile.components import component_kinds, register_component
from teola.ir.engine_spec import Engine
from teola.ir.graph import EngineInfo, Graph, GraphError
from teola.ir.node import Node
from teola.ir.ops import PrimOp
from teola.ir.primitive import Primitive
from teola.ir.refs import Ref
from teola.passes import PassResult, register_pass

__all__ = [
    "App",
    "Compiled",
    "Engine",
    "EngineInfo",
    "Graph",
    "GraphError",
    "Node",
    "PassResult",
    "PrimOp",
    "Primitive",
    "Ref",
    "component_kinds",
    "register_component",
    "register_pass",
]
__version__ = "0.1.0"
