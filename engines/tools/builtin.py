"""The default tools of the tool engine: `calculator` (arithmetic parsed with `ast`, never `eval`),
`convert_units`, and the date helpers `add_days`, `days_between`, `weekday`, `today`."""

from __future__ import annotations

import ast
import datetime as dt
import math
import operator
from collections.abc import Callable
from typing import Any

_BINOPS: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY: dict[type, Callable[[Any], Any]] = {ast.UAdd: operator.pos, ast.USub: operator.neg}
_FUNCS: dict[str, Callable[..., Any]] = {
    "sqrt": math.sqrt,
    "log": math.log,
    "log10": math.log10,
    "log2": math.log2,
    "exp": math.exp,
    "sin": math.sin,
    "cos": math.cos,
    "tan": math.tan,
    "asin": math.asin,
    "acos": math.acos,
    "atan": math.atan,
    "abs": abs,
    "round": round,
    "floor": math.floor,
    "ceil": math.ceil,
    "min": min,
    "max": max,
}
_CONSTS = {"pi": math.pi, "e": math.e, "tau": math.tau}
_MAX_BITS = 10_000


def _eval(node: ast.AST) -> Any:
    if isinstance(node, ast.Expression):
        return _eval(node.body)
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return node.value
    if isinstance(node, ast.Name) and node.id in _CONSTS:
        return _CONSTS[node.id]
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _UNARY[type(node.op)](_eval(node.operand))
    if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
        left, right = _eval(node.left), _eval(node.right)
        if isinstance(node.op, ast.Pow) and abs(left) > 1 and abs(right) * math.log2(abs(left)) > _MAX_BITS:
            raise ValueError("result too large")
        if (
            isinstance(node.op, ast.Mult)
            and isinstance(left, int)
            and isinstance(right, int)
            and left.bit_length() + right.bit_length() > _MAX_BITS
        ):
            raise ValueError("result too large")
        return _BINOPS[type(node.op)](left, right)
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in _FUNCS
        and not node.keywords
    ):
        return _FUNCS[node.func.id](*(_eval(a) for a in node.args))
    raise ValueError(
        f"unsupported syntax {ast.unparse(node)!r}: use numbers, + - * / // % **, parentheses, "
        f"{', '.join(sorted(_CONSTS))} and {', '.join(sorted(_FUNCS))}()"
    )


def calculator(expression: str) -> float | int:
    """Evaluate arithmetic safely (no eval): args expression, e.g. "2 * (3 + 4) ** 2 / sqrt(16)"."""
    if not isinstance(expression, str) or not expression.strip():
        raise ValueError("expression must be a non-empty string")
    if len(expression) > 1000:
        raise ValueError("expression longer than 1000 characters")
    try:
        tree = ast.parse(expression.strip(), mode="eval")
    except (SyntaxError, RecursionError, MemoryError) as exc:
        raise ValueError(f"cannot parse expression {expression!r}") from exc
    try:
        result = _eval(tree)
    except ZeroDivisionError as exc:
        raise ValueError("division by zero") from exc
    except OverflowError as exc:
        raise ValueError("result too large") from exc
    except RecursionError as exc:
        raise ValueError("expression nested too deeply") from exc
    if isinstance(result, complex) or (isinstance(result, float) and not math.isfinite(result)):
        raise ValueError(f"result {result!r} is not a finite real number")
    if isinstance(result, float) and result.is_integer() and abs(result) < 2**53:
        return int(result)
    return result


_UNITS: dict[str, tuple[str, float]] = {
    # length (m)
    "mm": ("length", 1e-3),
    "cm": ("length", 1e-2),
    "m": ("length", 1.0),
    "km": ("length", 1e3),
    "in": ("length", 0.0254),
    "ft": ("length", 0.3048),
    "yd": ("length", 0.9144),
    "mi": ("length", 1609.344),
    # mass (kg)
    "mg": ("mass", 1e-6),
    "g": ("mass", 1e-3),
    "kg": ("mass", 1.0),
    "t": ("mass", 1e3),
    "oz": ("mass", 0.028349523125),
    "lb": ("mass", 0.45359237),
    # time (s)
    "ms": ("time", 1e-3),
    "s": ("time", 1.0),
    "min": ("time", 60.0),
    "h": ("time", 3600.0),
    "day": ("time", 86400.0),
    "week": ("time", 604800.0),
    "year": ("time", 31557600.0),
    # volume (l)
    "ml": ("volume", 1e-3),
    "l": ("volume", 1.0),
    "gal": ("volume", 3.785411784),
    "m3": ("volume", 1e3),
    # speed (m/s)
    "m/s": ("speed", 1.0),
    "km/h": ("speed", 1 / 3.6),
    "mph": ("speed", 0.44704),
    "knot": ("speed", 1852 / 3600),
    # data (byte)
    "b": ("data", 1.0),
    "kb": ("data", 1e3),
    "mb": ("data", 1e6),
    "gb": ("data", 1e9),
    "tb": ("data", 1e12),
    "kib": ("data", 1024.0),
    "mib": ("data", 1024.0**2),
    "gib": ("data", 1024.0**3),
}
_TEMPS = {"c", "f", "k"}


def convert_units(value: float, from_unit: str, to_unit: str) -> float:
    """Convert a quantity: args value, from_unit, to_unit (length, mass, time, volume, speed, data, c/f/k)."""
    v = float(value)
    a, b = str(from_unit).strip().lower(), str(to_unit).strip().lower()
    if a in _TEMPS and b in _TEMPS:
        kelvin = {"c": v + 273.15, "f": (v - 32) * 5 / 9 + 273.15, "k": v}[a]
        return {"c": kelvin - 273.15, "f": (kelvin - 273.15) * 9 / 5 + 32, "k": kelvin}[b]
    if a not in _UNITS or b not in _UNITS:
        unknown = a if a not in _UNITS and a not in _TEMPS else b
        raise ValueError(f"unknown unit {unknown!r}; known: {', '.join(sorted(_UNITS) + sorted(_TEMPS))}")
    if _UNITS[a][0] != _UNITS[b][0]:
        raise ValueError(f"cannot convert {_UNITS[a][0]} ({a}) to {_UNITS[b][0]} ({b})")
    return v * _UNITS[a][1] / _UNITS[b][1]


def _date(value: str, arg: str) -> dt.date:
    try:
        return dt.date.fromisoformat(str(value))
    except ValueError as exc:
        raise ValueError(f"{arg}={value!r}: use an ISO date YYYY-MM-DD") from exc


def add_days(date: str, days: int) -> str:
    """Add (or subtract) days to a date: args date (YYYY-MM-DD), days -> YYYY-MM-DD."""
    return (_date(date, "date") + dt.timedelta(days=int(days))).isoformat()


def days_between(start: str, end: str) -> int:
    """Days from start to end (negative if end is earlier): args start, end (YYYY-MM-DD)."""
    return (_date(end, "end") - _date(start, "start")).days


def weekday(date: str) -> str:
    """Day of the week of a date: args date (YYYY-MM-DD) -> e.g. "Monday"."""
    return _date(date, "date").strftime("%A")


def today() -> str:
    """Today's date (local time) as YYYY-MM-DD; no args."""
    return dt.date.today().isoformat()
