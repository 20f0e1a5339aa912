"""Grammar construction cannot take the process down (issue #14, native crash).

Schemas with large repetition counts are loosened before conversion; every new grammar is
built once in a child process first; an unusable grammar is told to the user as a Notice.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.backends.base import Capabilities, make_request
from engine.backends.scripted import ScriptedBackend
from engine.errors import ConfigError
from engine.events import Notice, StructuredValue, TurnDone, event_to_json
from engine.llama import grammar_guard
from engine.llama.grammar_guard import grammar_problem
from engine.turns.runner import TurnRunner
from engine.turns.schema_limits import (
    MAX_SCHEMA_DEPTH,
    REPEAT_LIMIT,
    bounded_for_grammar,
    bounded_pattern,
    schema_depth_problem,
)
from engine.turns.structured import compile_schema, grammar_for, load_schema
from models.library.default_model import default_model_path

ISSUE_SCHEMAS: dict[str, dict[str, Any]] = {
    "maxLength 20000": {
        "type": "object",
        "properties": {"summary": {"type": "string", "maxLength": 20000}},
        "required": ["summary"],
    },
    "maxLength 5000": {
        "type": "object",
        "properties": {"summary": {"type": "string", "maxLength": 5000}},
        "required": ["summary"],
    },
    "maxItems 20000": {"type": "array", "items": {"type": "integer"}, "maxItems": 20000},
    "pattern {1,30000}": {"type": "string", "pattern": "^[a-z]{1,30000}$"},
    "minLength 30000": {"type": "string", "minLength": 30000},
    "minItems 9999": {"type": "array", "items": {"type": "string"}, "minItems": 9999, "maxItems": 10000},
}


class _AcceptsAll(ScriptedBackend):
    capabilities = Capabilities(grammar=True, device="Scripted")

    def check_grammar(self, gbnf: str) -> str | None:
        return None


def _schema_to_gbnf(schema: Any) -> str:
    """The grammar Ember builds for `schema` (the converter's errors propagate)."""
    notes: list[str] = []
    gbnf = grammar_for(_AcceptsAll([]), schema, notes)
    if gbnf is None:
        raise ValueError(notes[0] if notes else "no grammar")
    return gbnf


def _nesting(gbnf: str) -> int:
    """The deepest parenthesis nesting in a grammar (what overflows llama.cpp's parser)."""
    depth = deepest = 0
    in_string = in_class = escaped = False
    for c in gbnf:
        if escaped:
            escaped = False
        elif c == "\\":
            escaped = True
        elif in_string:
            in_string = c != '"'
        elif in_class:
            in_class = c != "]"
        elif c == '"':
            in_string = True
        elif c == "[":
            in_class = True
        elif c == "(":
            depth += 1
            deepest = max(deepest, depth)
        elif c == ")":
            depth -= 1
    return deepest


@pytest.fixture(autouse=True)
def _fresh_verdicts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EMBER_HOME", str(tmp_path / "home"))
    grammar_guard.forget()


# -- bounding what the conversion emits ------------------------------------------------------


@pytest.mark.parametrize("name", list(ISSUE_SCHEMAS))
def test_issue_schemas_convert_to_small_shallow_grammars(name: str) -> None:
    gbnf = _schema_to_gbnf(ISSUE_SCHEMAS[name])
    assert _nesting(gbnf) <= REPEAT_LIMIT + 8
    assert len(gbnf) < 20_000


counts = st.one_of(st.integers(0, 400), st.integers(0, 10**6), st.floats(0, 1e9, allow_nan=False))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(low=counts, high=counts, kind=st.sampled_from(["string", "array"]))
def test_any_repetition_count_stays_within_the_limit(low: float, high: float, kind: str) -> None:
    keys = ("minLength", "maxLength") if kind == "string" else ("minItems", "maxItems")
    schema: dict[str, Any] = {"type": kind, keys[0]: low, keys[1]: high}
    if kind == "array":
        schema["items"] = {"type": "integer"}
    bounded = bounded_for_grammar(schema)
    for key in keys:
        assert key not in bounded or bounded[key] <= REPEAT_LIMIT
    try:
        gbnf = _schema_to_gbnf(schema)
    except Exception:  # the converter may refuse floats or min > max: that just means no grammar
        return
    assert _nesting(gbnf) <= REPEAT_LIMIT + 8


quantifier = st.one_of(
    st.integers(0, 10**6).map(lambda n: f"{{{n}}}"),
    st.integers(0, 10**6).map(lambda n: f"{{{n},}}"),
    st.tuples(st.integers(0, 10**6), st.integers(0, 10**6)).map(lambda t: f"{{{min(t)},{max(t)}}}"),
)
atom = st.sampled_from(["a", "[a-z]", "\\d", "(ab)", "[{]", "\\{", "."])


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(atom, st.one_of(st.just(""), quantifier)), min_size=1, max_size=6))
def test_bounded_patterns_have_no_count_above_the_limit(parts: list[tuple[str, str]]) -> None:
    pattern = "^" + "".join(a + q for a, q in parts) + "$"
    out = bounded_pattern(pattern)
    for m in re.finditer(r"(?<!\\)\{(\d*)(?:,(\d*))?\}", out):
        assert all(int(n) <= REPEAT_LIMIT for n in m.groups() if n)
    re.compile(out)  # still a valid regular expression
    if all(not q or max(map(int, re.findall(r"\d+", q))) <= REPEAT_LIMIT for _, q in parts):
        assert out == pattern  # small counts are left exactly as written


def test_escaped_and_class_braces_are_not_quantifiers() -> None:
    assert bounded_pattern(r"^\{9999999\}[{]{2,3}$") == r"^\{9999999\}[{]{2,3}$"
    assert bounded_pattern("^a{1,30000}b{50000}c{7,}$") == "^a{1,}b+c{7,}$"


# -- depth and reference loops: one line, never RecursionError -----------------------------


def _nested(depth: int) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(depth):
        schema = {"type": "array", "items": schema}
    return schema


@pytest.mark.parametrize(
    "schema",
    [
        {"$ref": "#"},
        {"allOf": [{"$ref": "#"}]},
        {"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"},
    ],
)
def test_a_schema_that_refers_to_itself_forever_is_one_line(schema: dict[str, Any]) -> None:
    with pytest.raises(ConfigError, match="refers to itself without end"):
        compile_schema(schema)


@pytest.mark.parametrize("depth", [MAX_SCHEMA_DEPTH + 1, 3000, 100_000])
def test_a_very_deep_schema_file_is_one_line(tmp_path: Path, depth: int) -> None:
    path = tmp_path / "deep.json"
    path.write_text('{"items":' * depth + "{}" + "}" * depth)
    with pytest.raises(ConfigError) as info:
        load_schema(path)
    assert "\n" not in str(info.value)
    assert "deep" in str(info.value)


def test_a_reasonably_nested_schema_is_fine() -> None:
    assert schema_depth_problem(_nested(20)) is None
    compile_schema(_nested(20))


# -- the child-process check --------------------------------------------------------------


@pytest.fixture(scope="module")
def model() -> Path:
    return default_model_path()


@pytest.mark.slow  # seconds: measured in the fast lane (CONTRIBUTING.md)
def test_issue_grammars_pass_the_child_check(model: Path) -> None:
    for schema in ISSUE_SCHEMAS.values():
        assert grammar_problem(model, _schema_to_gbnf(schema)) is None


@pytest.mark.slow  # starts a process or uses the real model (tests/slow_marks.py)
def test_a_grammar_that_crashes_llama_cpp_kills_only_the_child(model: Path) -> None:
    # Unbounded conversion of maxLength 20000: 20,000 nested groups overflow the native stack.
    deep = "root ::= " + '("a" ' * 20000 + ")?" * 20000 + "\n"
    problem = grammar_problem(model, deep)
    assert problem is not None
    assert "crashes" in problem or "rejected" in problem


@pytest.mark.slow  # starts a process or uses the real model (tests/slow_marks.py)
def test_an_invalid_grammar_is_rejected(model: Path) -> None:
    assert grammar_problem(model, "root ::= (((") == "llama.cpp rejected the grammar"


@pytest.mark.slow  # starts a process or uses the real model (tests/slow_marks.py)
def test_verdicts_are_cached_per_grammar_in_memory_and_on_disk(model: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    gbnf = 'root ::= "yes" | "no"\n'
    assert grammar_problem(model, gbnf) is None
    grammar_guard.forget()  # a new process: only the disk cache is left

    def no_child(*_: Any, **__: Any) -> Any:
        raise AssertionError("a cached grammar started a child process")

    monkeypatch.setattr(subprocess, "run", no_child)
    assert grammar_problem(model, gbnf) is None


def test_a_grammar_too_large_is_refused_without_a_child(model: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: pytest.fail("child started"))  # type: ignore[misc]
    problem = grammar_problem(model, "root ::= " + '"a" ' * 100_000)
    assert problem is not None and "too large" in problem


# -- the user is told ---------------------------------------------------------------------


class GrammarBackend(ScriptedBackend):
    capabilities = Capabilities(grammar=True, device="Scripted")

    def __init__(self, reply: str, problem: str | None) -> None:
        super().__init__([[reply]])
        self.problem = problem

    def check_grammar(self, gbnf: str) -> str | None:
        return self.problem


def _structured_turn(backend: ScriptedBackend, schema: Any) -> list[Any]:
    request = make_request([{"role": "user", "content": "x"}], schema=schema)
    return list(TurnRunner(backend).run(request))


def test_an_unusable_grammar_is_a_notice_event_in_the_turn_stream() -> None:
    backend = GrammarBackend('"ok"', "llama.cpp crashes on this grammar")
    events = _structured_turn(backend, {"type": "string"})
    assert events[-2:] == [StructuredValue("ok"), events[-1]] and isinstance(events[-1], TurnDone)
    notices = [e for e in events if isinstance(e, Notice)]
    assert len(notices) == 1 and events[0] is notices[0]  # said before the reply
    assert "llama.cpp crashes on this grammar" in notices[0].text
    assert "not constrained" in notices[0].text
    assert event_to_json(notices[0]) == {"type": "notice", "text": notices[0].text}
    assert backend.requests[0].grammar is None


def test_a_usable_grammar_gives_no_notice() -> None:
    backend = GrammarBackend('"ok"', None)
    events = _structured_turn(backend, ISSUE_SCHEMAS["maxLength 20000"]["properties"]["summary"])
    assert not [e for e in events if isinstance(e, Notice)]
    assert StructuredValue("ok") in events
    assert backend.requests[0].grammar is not None


def test_json_round_trip_of_issue_schemas_is_unchanged() -> None:
    # Bounding works on a copy: the schema the reply is validated against is untouched.
    for schema in ISSUE_SCHEMAS.values():
        before = json.dumps(schema, sort_keys=True)
        bounded_for_grammar(schema)
        assert json.dumps(schema, sort_keys=True) == before


schema_leaf = st.sampled_from(
    [
        {"type": "string"},
        {"type": "integer"},
        {"type": "boolean"},
        {"$ref": "#"},
        {"enum": [1, "a"]},
        {"type": "string", "maxLength": 20000},
        {"type": "string", "pattern": "^[a-z]{1,30000}$"},
        {"type": "array", "maxItems": 99999},
        {"const": None},
        {"type": "nonsense"},
        {"minLength": -1},
    ]
)
schemas = st.recursive(
    schema_leaf,
    lambda inner: st.one_of(
        st.builds(
            lambda p: {"type": "object", "properties": p, "required": list(p)},
            st.dictionaries(st.sampled_from(["a", "b", "c"]), inner, max_size=3),
        ),
        st.builds(lambda i: {"type": "array", "items": i, "maxItems": 20000}, inner),
        st.builds(lambda xs: {"anyOf": xs}, st.lists(inner, min_size=1, max_size=3)),
    ),
    max_leaves=10,
)


@pytest.mark.slow  # seconds: measured in the fast lane (CONTRIBUTING.md)
@settings(max_examples=80, deadline=None)
@given(schemas)
def test_any_schema_compiles_or_is_one_line_and_its_grammar_stays_shallow(schema: dict[str, Any]) -> None:
    try:
        compile_schema(schema)
    except ConfigError as exc:
        error = str(exc)
        assert "\n" not in error
        return
    notes: list[str] = []
    gbnf = grammar_for(_AcceptsAll([]), schema, notes)  # never raises: no grammar is a note
    if gbnf is None:
        assert len(notes) == 1
    else:
        assert _nesting(gbnf) <= REPEAT_LIMIT + 8 * MAX_SCHEMA_DEPTH


@pytest.mark.slow  # seconds: measured in the fast lane (CONTRIBUTING.md)
def test_a_checker_that_cannot_start_is_not_a_verdict(model: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*_: Any, **__: Any) -> Any:
        raise FileNotFoundError(2, "No such file or directory")

    gbnf = 'root ::= "maybe"\n'
    with monkeypatch.context() as patch:
        patch.setattr(subprocess, "run", broken)
        assert "could not be checked" in str(grammar_problem(model, gbnf))
    assert grammar_problem(model, gbnf) is None  # checked again, not remembered as unusable


@pytest.mark.parametrize("events", [False, True])
def test_the_cli_says_an_unusable_grammar(
    events: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from desktop.cli import cmd_chat
    from desktop.cli.main import main

    backend = GrammarBackend('{"a": 1}', "llama.cpp crashes on this grammar")
    monkeypatch.setattr(cmd_chat, "open_backend", lambda args, settings: backend)
    schema = tmp_path / "schema.json"
    schema.write_text('{"type": "object"}')
    flags = ["--events"] if events else []
    assert main(["chat", "--no-history", "--schema", str(schema), *flags, "json please"]) == 0
    out, err = capsys.readouterr()
    if events:
        lines = [json.loads(line) for line in out.splitlines()]
        assert [line["type"] for line in lines] == ["notice", "json", "done"]
        assert "llama.cpp crashes on this grammar" in lines[0]["text"]
    else:
        assert json.loads(out) == {"a": 1}
        assert err.startswith("ember: note: Decoding is not constrained to the schema: llama.cpp crashes")
