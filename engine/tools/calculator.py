"""A safe arithmetic evaluator for the `calculator` tool: an `ast` walk, never `eval`.

Only number literals, + - * / // % ** (unary + and -), parentheses and a short list of
math functions and constants. Bounds keep one expression from taking the machine (a tool
call runs on the model's thread; big-integer work there holds the GIL and freezes the window):
the text length, the number of syntax nodes, the size of every integer going into and coming
out of an operation (4,096 bits), a power's result size before it is computed, and `round`'s
digits (±1,000). Every function checks how many arguments it takes and of what kind, so no
Python error escapes: everything is one `CalcError` line.
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable
from typing import Any

MAX_EXPRESSION_CHARS = 500
MAX_NODES = 200
MAX_EXPONENT = 10_000
MAX_INT_BITS = 4_096
MAX_ROUND_DIGITS = 1_000

Number = int | float


class CalcError(ValueError):
    """The expression is not allowed or cannot be computed; the message is one line."""


_BINARY: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: lambda a, b: a / b,
    ast.FloorDiv: lambda a, b: a // b,
    ast.Mod: operator.mod,
    ast.Pow: lambda a, b: a**b,
}
_UNARY: dict[type[ast.unaryop], Callable[[Any], Any]] = {ast.UAdd: operator.pos, ast.USub: operator.neg}
_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "sqrt": math.sqrt,
    "sin": math.sin,
    "cos": math.cos,
    "tan": math.tan,
    "asin": math.asin,
    "acos": math.acos,
    "atan": math.atan,
    "log": math.log,
    "log10": math.log10,
    "log2": math.log2,
    "exp": math.exp,
    "abs": abs,
    "round": round,
    "floor": math.floor,
    "ceil": math.ceil,
}
_TWO_ARGUMENTS = {
    "log": "log() takes a number and an optional base",
    "round": "round() takes a number and an optional whole number of digits",
}
_CONSTANTS: dict[str, float] = {"pi": math.pi, "e": math.e, "tau": math.tau}


def calculate(expression: str) -> Number:
    """The value of `expression`; CalcError for anything outside the allowed arithmetic."""
    text = expression.strip().replace("^", "**")  # people (and models) write ^ for powers
    if not text:
        raise CalcError("the expression is empty")
    if len(text) > MAX_EXPRESSION_CHARS:
        raise CalcError(f"the expression is longer than {MAX_EXPRESSION_CHARS} characters")
    try:
        tree = ast.parse(text, mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        raise CalcError("the expression is not valid arithmetic") from exc
    if sum(1 for _ in ast.walk(tree)) > MAX_NODES:
        raise CalcError("the expression is too long")
    try:
        return _check(_eval(tree.body))
    except ZeroDivisionError as exc:
        raise CalcError("division by zero") from exc
    except (OverflowError, ValueError, TypeError) as exc:
        if isinstance(exc, CalcError):
            raise
        raise CalcError(f"cannot compute this: {exc}") from exc


def _eval(node: ast.expr) -> Number:
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return _check(node.value)
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _eval(node.left), _eval(node.right)
        if isinstance(node.op, ast.Pow):
            _check_power(left, right)
        return _check(_BINARY[type(node.op)](left, right))
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _check(_UNARY[type(node.op)](_eval(node.operand)))
    if isinstance(node, ast.Name) and node.id in _CONSTANTS:
        return _CONSTANTS[node.id]
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _FUNCTIONS:
        return _call(node.func.id, node)
    raise CalcError(f"not allowed in a calculation: {ast.unparse(node)[:40]!r}")


def _call(name: str, node: ast.Call) -> Number:
    most = 2 if name in _TWO_ARGUMENTS else 1
    if node.keywords or not 1 <= len(node.args) <= most:
        raise CalcError(_TWO_ARGUMENTS.get(name, f"{name}() takes one number"))
    args = [_eval(a) for a in node.args]
    if name == "round" and len(args) == 2:
        _check_round_digits(args[1])
    if name == "log" and len(args) == 2 and args[1] in (2, 10):  # exact where log(x, base) is not
        return _check((math.log2 if args[1] == 2 else math.log10)(args[0]))
    return _check(_FUNCTIONS[name](*args))


def _check_round_digits(digits: Number) -> None:
    # int.__round__ computes 10 ** -digits: round(1, -10**9) would run for hours.
    if not isinstance(digits, int):
        raise CalcError(_TWO_ARGUMENTS["round"])
    if abs(digits) > MAX_ROUND_DIGITS:
        raise CalcError(f"round() digits are limited to ±{MAX_ROUND_DIGITS}")


def _check_power(base: Number, exponent: Number) -> None:
    if abs(exponent) > MAX_EXPONENT:
        raise CalcError(f"exponents are limited to ±{MAX_EXPONENT}")
    if isinstance(base, int) and isinstance(exponent, int) and exponent > 0 and abs(base) > 1:
        # The result has about exponent × log2(|base|) bits; 2 ** 2048 (2,049 bits) is fine.
        if exponent * math.log2(abs(base)) > MAX_INT_BITS:
            raise CalcError("the result would be too large")


def _check(value: Any) -> Number:
    if isinstance(value, complex):
        raise CalcError("the result is not a real number")
    if isinstance(value, int) and value.bit_length() > MAX_INT_BITS:
        raise CalcError("the result would be too large")
    return value


def format_number(value: Number) -> str:
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e16:
        return str(int(value))
    return repr(value)
