"""Per-family parsers: the text of one stripped tool-call span -> structured calls.

Each parser gets the span exactly as the guardrail cut it (start marker, body and end
marker, special tokens as their text) and returns the calls in it, or raises
`CallSyntaxError` when the span is not a well-formed call. Nothing here evaluates model
output: JSON goes through `json`, Python-call syntax through `ast` literals only.

`PARSERS` attaches a parser to each family of the one table of model formats
(`models.formats`, by its stable `key`); `parser_for_span` falls back to the span's
opening marker, looked up in the same table.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

from models.formats import tool_call_spans
from models.library.json_input import bounded_loads


@dataclass(frozen=True, slots=True)
class ParsedCall:
    """One tool call as the model wrote it: a name and JSON-object arguments."""

    name: str
    arguments: dict[str, Any]
    call_id: str | None = None  # a model-chosen id (Kimi K2, Mistral Nemo, Command R7B)


class CallSyntaxError(ValueError):
    """The span is not a well-formed tool call."""


Parser = Callable[[str], list[ParsedCall]]

_NAME = re.compile(r"[A-Za-z_][\w.\-]*\Z")


# --- shared pieces ------------------------------------------------------------------------


def _between(span: str, start: str, end: str | None) -> str:
    body = span[len(start) :] if span.startswith(start) else span
    if end and body.endswith(end):
        body = body[: -len(end)]
    return body.strip()


def _call(name: Any, arguments: Any, call_id: Any = None) -> ParsedCall:
    if not isinstance(name, str) or not _NAME.match(name.strip()):
        raise CallSyntaxError(f"not a tool name: {name!r}")
    if isinstance(arguments, str):  # some models double-encode the arguments
        arguments = _json(arguments) if arguments.strip() else {}
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, dict):
        raise CallSyntaxError("tool arguments must be a JSON object")
    return ParsedCall(name.strip(), cast(dict[str, Any], arguments), None if call_id is None else str(call_id))


def _json(text: str) -> Any:
    try:
        return bounded_loads(text)
    except json.JSONDecodeError as exc:
        raise CallSyntaxError(f"not JSON: {exc.msg}") from exc


def _strip_fence(text: str) -> str:
    text = text.strip()
    fenced = re.fullmatch(r"```(?:json)?\s*(.*?)\s*```", text, re.S)
    return fenced.group(1) if fenced else text


def _json_values(text: str) -> list[Any]:
    """One JSON value, a list of them, or several separated by `;`/`,`/newlines."""
    text = _strip_fence(text)
    decoder = json.JSONDecoder()
    values: list[Any] = []
    pos = 0
    while True:
        while pos < len(text) and text[pos] in " \t\r\n;,":
            pos += 1
        if pos >= len(text):
            break
        try:
            value, pos = decoder.raw_decode(text, pos)
        except json.JSONDecodeError as exc:
            raise CallSyntaxError(f"not JSON: {exc.msg}") from exc
        values.extend(cast(list[Any], value) if isinstance(value, list) else [value])
    if not values:
        raise CallSyntaxError("empty tool call")
    return values


def _object_calls(
    text: str, *, name_key: str = "name", arg_keys: tuple[str, ...] = ("arguments", "parameters"), id_key: str = "id"
) -> list[ParsedCall]:
    calls: list[ParsedCall] = []
    for value in _json_values(text):
        if not isinstance(value, dict):
            raise CallSyntaxError("a tool call must be a JSON object")
        obj = cast(dict[str, Any], value)
        if "function" in obj and isinstance(obj["function"], dict):  # OpenAI-shaped
            obj = cast(dict[str, Any], obj["function"])
        arguments: Any = next((obj[k] for k in arg_keys if k in obj), None)
        calls.append(_call(obj.get(name_key), arguments, obj.get(id_key)))
    return calls


def _typed(value: str) -> Any:
    """A raw XML-style parameter value: JSON when it is JSON, else the text itself."""
    stripped = value.strip()
    try:
        return bounded_loads(stripped)
    except json.JSONDecodeError:
        return stripped


# --- Python-call syntax (LFM2, Llama 4, Gemma 3 tool_code) -------------------------------


def _literal(node: ast.expr) -> Any:
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError) as exc:
        raise CallSyntaxError("an argument is not a literal value") from exc


def _dotted(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    raise CallSyntaxError("a call must name a function")


def python_calls(text: str) -> list[ParsedCall]:
    """`[f(a=1), g(b="x")]` or `f(a=1)`: keyword arguments with literal values only."""
    text = _strip_fence(text)
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except (SyntaxError, ValueError, MemoryError, RecursionError) as exc:
        raise CallSyntaxError("not Python call syntax") from exc
    body = tree.body
    nodes = body.elts if isinstance(body, (ast.List, ast.Tuple)) else [body]
    calls: list[ParsedCall] = []
    for node in nodes:
        if not isinstance(node, ast.Call) or (node.args and not _single_dict_arg(node)):
            raise CallSyntaxError("expected name(key=value, ...) calls")
        if node.args:
            arguments = _literal(node.args[0])
        else:
            if any(k.arg is None for k in node.keywords):
                raise CallSyntaxError("** arguments are not allowed")
            arguments = {cast(str, k.arg): _literal(k.value) for k in node.keywords}
        calls.append(_call(_dotted(node.func), arguments))
    if not calls:
        raise CallSyntaxError("empty tool call")
    return calls


def _single_dict_arg(node: ast.Call) -> bool:
    return len(node.args) == 1 and not node.keywords and isinstance(node.args[0], ast.Dict)


# --- the families -------------------------------------------------------------------------

_XML_FUNCTION = re.compile(r"<function=([^>\s]+)>(.*?)</function>", re.S)
_XML_PARAMETER = re.compile(r"<parameter=([^>\s]+)>(.*?)</parameter>", re.S)


def _xml_functions(body: str) -> list[ParsedCall]:
    """Qwen3-Coder / Seed-OSS: `<function=NAME><parameter=K>V</parameter></function>`."""
    calls = [
        _call(name, {k: _typed(v) for k, v in _XML_PARAMETER.findall(inner)})
        for name, inner in _XML_FUNCTION.findall(body)
    ]
    if not calls or _XML_FUNCTION.sub("", body).strip():
        raise CallSyntaxError("expected <function=NAME> blocks")
    return calls


_GLM_PAIR = re.compile(r"<arg_key>(.*?)</arg_key>\s*<arg_value>(.*?)</arg_value>", re.S)


def _glm(body: str) -> list[ParsedCall]:
    """GLM-4.5+: `NAME<arg_key>K</arg_key><arg_value>V</arg_value>…` (no JSON around it)."""
    name, _, rest = body.partition("<arg_key>")
    rest = "<arg_key>" + rest if _ else ""
    if _GLM_PAIR.sub("", rest).strip():
        raise CallSyntaxError("expected <arg_key>/<arg_value> pairs")
    return [_call(name.strip(), {k.strip(): _typed(v) for k, v in _GLM_PAIR.findall(rest)})]


def hermes(span: str) -> list[ParsedCall]:
    """`<tool_call>{"name": …, "arguments": {…}}</tool_call>` (Granite 3.1: a list); also the
    Qwen3-Coder XML body and GLM-4.5's `NAME<arg_key>…` body, which share the tags."""
    body = _between(span, "<tool_call>", "</tool_call>")
    if body.startswith("<function="):
        return _xml_functions(body)
    if body.startswith(("{", "[", "```")):
        return _object_calls(body)
    return _glm(body)


def longcat(span: str) -> list[ParsedCall]:
    return _object_calls(_between(span, "<longcat_tool_call>", "</longcat_tool_call>"))


def seed_oss(span: str) -> list[ParsedCall]:
    return _xml_functions(_between(span, "<seed:tool_call>", "</seed:tool_call>"))


def lfm2(span: str) -> list[ParsedCall]:
    """`<|tool_call_start|>[get_weather(location="Paris")]<|tool_call_end|>`."""
    return python_calls(_between(span, "<|tool_call_start|>", "<|tool_call_end|>"))


def llama4(span: str) -> list[ParsedCall]:
    return python_calls(_between(span, "<|python_start|>", "<|python_end|>"))


def llama3(span: str) -> list[ParsedCall]:
    """`<|python_tag|>{"name": "f", "parameters": {…}}` (several joined by `;`) to the end."""
    body = _between(span, "<|python_tag|>", None)
    for end in ("<|eom_id|>", "<|eot_id|>"):
        body = body.removesuffix(end).strip()
    if body.startswith("{"):
        return _object_calls(body)
    # A built-in tool: `brave_search.call(query="…")` names the tool `brave_search`.
    return [ParsedCall(c.name.removesuffix(".call"), c.arguments) for c in python_calls(body)]


_MISTRAL_NAMED = re.compile(r"([A-Za-z_][\w.\-]*)\s*(?:\[CALL_ID\]\s*(\w+)\s*)?(?:\[ARGS\])?\s*(?=\{)")


def mistral(span: str) -> list[ParsedCall]:
    """`[TOOL_CALLS][{…}]` (v3), `[TOOL_CALLS]NAME{…}` (v11) or `[TOOL_CALLS]NAME[ARGS]{…}`, repeated."""
    body = _between(span, "[TOOL_CALLS]", None)
    if body.startswith(("[", "{")):
        return _object_calls(body)
    calls: list[ParsedCall] = []
    decoder = json.JSONDecoder()
    pos = 0
    while pos < len(body):
        named = _MISTRAL_NAMED.match(body, pos)
        if named is None:
            raise CallSyntaxError("expected NAME{arguments}")
        try:
            arguments, pos = decoder.raw_decode(body, named.end())
        except json.JSONDecodeError as exc:
            raise CallSyntaxError(f"not JSON: {exc.msg}") from exc
        calls.append(_call(named.group(1), arguments, named.group(2)))
        rest = body[pos:].lstrip()
        pos = len(body) - len(rest.removeprefix("[TOOL_CALLS]").lstrip())
    if not calls:
        raise CallSyntaxError("empty tool call")
    return calls


# DeepSeek spells its markers with `｜` and `▁`, ASCII `_` or spaces (llama.cpp accepts all).
_DS = r"(?:▁|_| |\\_)"
_DS_CALL = re.compile(
    rf"<｜tool{_DS}call{_DS}begin｜>(.*?)<｜tool{_DS}sep｜>(.*?)(?:<｜tool{_DS}call{_DS}end｜>|\Z)", re.S
)


def deepseek(span: str) -> list[ParsedCall]:
    """V3/R1 `function<｜tool▁sep｜>NAME\\n```json\\n{…}\\n```` and V3.1 `NAME<｜tool▁sep｜>{…}`."""
    calls: list[ParsedCall] = []
    for head, tail in _DS_CALL.findall(span):
        tail = re.sub(rf"<｜tool{_DS}calls{_DS}end｜>\s*\Z", "", tail)
        if tail.lstrip().startswith("<steptml:invoke"):  # Step-3 wraps its calls the DeepSeek way
            calls.extend(_steptml(tail))
            continue
        if head.strip() == "function":  # V3 / R1: the name leads the fenced arguments
            name, _, arguments = tail.partition("\n")
        else:
            name, arguments = head, tail
        calls.append(_call(name, _json(_strip_fence(arguments)) if arguments.strip() else {}))
    if not calls:
        raise CallSyntaxError("no DeepSeek tool call")
    return calls


_STEP_INVOKE = re.compile(r'<steptml:invoke name="([^"]+)">(.*?)</steptml:invoke>', re.S)
_STEP_PARAM = re.compile(r'<steptml:parameter name="([^"]+)">(.*?)</steptml:parameter>', re.S)


def _invokes(invoke: re.Pattern[str], parameter: re.Pattern[str], text: str) -> list[ParsedCall]:
    """`<invoke name="NAME"><parameter name="K">V</parameter></invoke>` under a family's own tag names."""
    calls = [_call(name, {k: _typed(v) for k, v in parameter.findall(inner)}) for name, inner in invoke.findall(text)]
    if not calls:
        raise CallSyntaxError("no invoke")
    return calls


def _steptml(text: str) -> list[ParsedCall]:
    return _invokes(_STEP_INVOKE, _STEP_PARAM, text)


_DSML_INVOKE = re.compile(r'<｜DSML｜invoke name="([^"]+)">(.*?)</｜DSML｜invoke>', re.S)
_DSML_PARAM = re.compile(
    r'<｜DSML｜parameter name="([^"]+)"(?: string="(true|false)")?>(.*?)</｜DSML｜parameter>', re.S
)


def deepseek_dsml(span: str) -> list[ParsedCall]:
    """DeepSeek V3.2: `<｜DSML｜invoke name=…>` with typed `<｜DSML｜parameter>`s."""
    calls: list[ParsedCall] = []
    for name, inner in _DSML_INVOKE.findall(span):
        arguments = {k: (v if is_string == "true" else _typed(v)) for k, is_string, v in _DSML_PARAM.findall(inner)}
        calls.append(_call(name, arguments))
    if not calls:
        raise CallSyntaxError("no DSML invoke")
    return calls


_KIMI_CALL = re.compile(
    r"<\|tool_call_begin\|>\s*(?:functions\.)?([^:<\s]+)(?::(\d+))?\s*<\|tool_call_argument_begin\|>(.*?)"
    r"(?:<\|tool_call_end\|>|\Z)",
    re.S,
)


def kimi_k2(span: str) -> list[ParsedCall]:
    """`<|tool_call_begin|>functions.NAME:IDX<|tool_call_argument_begin|>{…}<|tool_call_end|>`."""
    calls = [
        _call(
            name,
            _json(arguments.replace("<|tool_calls_section_end|>", "").strip() or "{}"),
            f"functions.{name}:{index}" if index else None,
        )
        for name, index, arguments in _KIMI_CALL.findall(span)
    ]
    if not calls:
        raise CallSyntaxError("no Kimi K2 tool call")
    return calls


_HARMONY = re.compile(r"to=functions\.([\w.\-]+).*?<\|message\|>(.*)", re.S)


def gpt_oss(span: str) -> list[ParsedCall]:
    """Harmony: recipient `to=functions.NAME` in the header, JSON after `<|message|>`."""
    found = _HARMONY.search(span)
    if found is None:
        raise CallSyntaxError("no Harmony function recipient")
    body = found.group(2)
    for end in ("<|call|>", "<|end|>"):
        body = body.removesuffix(end)
    return [_call(found.group(1), _json(body.strip()))]


def command_r7b(span: str) -> list[ParsedCall]:
    """`<|START_ACTION|>[{"tool_call_id": "0", "tool_name": "f", "parameters": {…}}]<|END_ACTION|>`."""
    body = _between(span, "<|START_ACTION|>", "<|END_ACTION|>")
    return _object_calls(body, name_key="tool_name", arg_keys=("parameters",), id_key="tool_call_id")


_MINIMAX_INVOKE = re.compile(r'<invoke name="([^"]+)">(.*?)</invoke>', re.S)
_MINIMAX_PARAM = re.compile(r'<parameter name="([^"]+)">(.*?)</parameter>', re.S)


def minimax(span: str) -> list[ParsedCall]:
    return _invokes(_MINIMAX_INVOKE, _MINIMAX_PARAM, span)


def jamba(span: str) -> list[ParsedCall]:
    return _object_calls(_between(span, "<tool_calls>", "</tool_calls>"))


def nemotron(span: str) -> list[ParsedCall]:
    return _object_calls(_between(span, "<TOOLCALL>", "</TOOLCALL>"))


def apertus(span: str) -> list[ParsedCall]:
    """`<|tools_prefix|>[{"NAME": {args}}]<|tools_suffix|>`: single-key objects."""
    calls: list[ParsedCall] = []
    for value in _json_values(_between(span, "<|tools_prefix|>", "<|tools_suffix|>")):
        if not isinstance(value, dict) or len(cast(dict[str, Any], value)) != 1:
            raise CallSyntaxError("expected {NAME: arguments} objects")
        ((name, arguments),) = cast(dict[str, Any], value).items()
        calls.append(_call(name, arguments))
    return calls


def internlm(span: str) -> list[ParsedCall]:
    body = _between(span, "<|action_start|>", "<|action_end|>").removeprefix("<|plugin|>")
    return _object_calls(body)


def _gemma_calls(body: str, quote: str) -> list[ParsedCall]:
    """`call:NAME{k:<q>text<q>,n:1}`: strings between `quote` delimiters, other values JSON."""
    found = re.fullmatch(r"call:([\w.\-]+)\{(.*)\}", body.strip(), re.S)
    if found is None:
        raise CallSyntaxError("expected call:NAME{…}")
    arguments: dict[str, Any] = {}
    rest = found.group(2).strip()
    while rest:
        key, colon, rest = rest.partition(":")
        if not colon or not key.strip():
            raise CallSyntaxError("expected key:value")
        if rest.startswith(quote):
            value, closed, rest = rest[len(quote) :].partition(quote)
            if not closed:
                raise CallSyntaxError("an unclosed string")
            arguments[key.strip()] = value
        else:
            raw, _, rest = rest.partition(",")
            arguments[key.strip()] = _typed(raw)
            rest = "," + rest if rest else ""
        rest = rest.strip().removeprefix(",").strip()
    return [_call(found.group(1), arguments)]


def gemma4(span: str) -> list[ParsedCall]:
    return _gemma_calls(_between(span, "<|tool_call>", "<tool_call|>"), '<|"|>')


def function_gemma(span: str) -> list[ParsedCall]:
    return _gemma_calls(_between(span, "<start_function_call>", "<end_function_call>"), "<escape>")


# Keyed by `models.formats` family keys: every family with tool-call markup has an entry,
# `None` saying outright that its calls are not parsed (tests/test_tool_calls.py checks).
PARSERS: dict[str, Parser | None] = {
    "hermes": hermes,
    "longcat": longcat,
    "seed-oss": seed_oss,
    "lfm2": lfm2,
    "llama4": llama4,
    "llama3": llama3,
    "mistral": mistral,
    "deepseek": deepseek,
    "step3": deepseek,
    "deepseek-v3.2": deepseek_dsml,
    "kimi-k2": kimi_k2,
    "harmony": gpt_oss,
    "command-r": command_r7b,
    "minimax": minimax,
    "jamba": jamba,
    "nemotron": nemotron,
    "apertus": apertus,
    "internlm": internlm,
    "gemma4": gemma4,
    "function-gemma": function_gemma,
    # Its calls are plain JSON after `<|function_call|>`, never stripped: no span reaches a parser.
    "gigachat": None,
}


def parser_for_span(family: str, span: str) -> Parser | None:
    """The parser for a span of `family` (a formats key); by the span's opening marker when
    the family is not a key (a registry built by hand), using the formats table's spans."""
    if family in PARSERS:
        return PARSERS[family]
    return next((PARSERS.get(fmt.key) for fmt, known in tool_call_spans() if span.startswith(known.start)), None)
