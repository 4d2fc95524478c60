"""teola: serve LLM applications as optimized primitive-level dataflow graphs."""
from teola.app import App
from teola.compiler import Compiled
from teola.components import component_kinds, register_component
from teola.engine_spec import Engine
from teola.graph import EngineInfo, Graph, GraphError
from teola.node import Node
from teola.ops import PrimOp
from teola.passes import PassResult, register_pass
from teola.primitive import Primitive
from teola.refs import Ref

__all__ = ["App", "Compiled", "Engine", "EngineInfo", "Graph", "GraphError", "Node", "PassResult", "PrimOp",
           "Primitive", "Ref", "component_kinds", "register_component", "register_pass"]
__version__ = "0.1.0"
