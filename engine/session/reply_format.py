"""A conversation's reply format: plain text, any JSON object, or JSON matching a schema (no Qt).

The format lives in the conversation's settings under `reply_format`, so it survives a
restart and travels with an export. A JSON reply is shown (and stored) as a fenced
```json block, which renders as a code block and reads back the same from history.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, cast

from engine.errors import ConfigError
from engine.turns.structured import compile_schema
from models.library.json_input import MAX_DEPTH, NestedTooDeep, bounded_loads

FormatKind = Literal["text", "json", "schema"]
SETTINGS_KEY = "reply_format"
ANY_OBJECT: dict[str, Any] = {"type": "object"}
SCHEMA_TEMPLATE = """{
  "type": "object",
  "properties": {
    "answer": {"type": "string"}
  },
  "required": ["answer"]
}"""
_LABELS: dict[FormatKind, str] = {"text": "Plain text", "json": "Any JSON object", "schema": "JSON schema"}


@dataclass(frozen=True, slots=True)
class ReplyFormat:
    kind: FormatKind = "text"
    schema_value: Mapping[str, Any] | None = None  # only for "schema"

    @property
    def schema(self) -> Mapping[str, Any] | None:
        """The JSON Schema replies must match; None for plain text."""
        if self.kind == "json":
            return ANY_OBJECT
        return self.schema_value if self.kind == "schema" else None

    @property
    def label(self) -> str:
        return _LABELS[self.kind]

    def to_settings(self) -> dict[str, Any] | None:
        if self.kind == "text":
            return None
        if self.kind == "json":
            return {"kind": "json"}
        return {"kind": "schema", "schema": dict(self.schema_value or {})}

    @classmethod
    def from_settings(cls, settings: Mapping[str, Any]) -> ReplyFormat:
        """The format stored in a conversation's settings; anything unusable reads as plain text."""
        raw: Any = settings.get(SETTINGS_KEY)
        if not isinstance(raw, dict):
            return cls()
        stored = cast(dict[str, Any], raw)
        if stored.get("kind") == "json":
            return cls("json")
        schema: Any = stored.get("schema")
        if stored.get("kind") == "schema" and isinstance(schema, dict) and check_schema(schema) is None:
            return cls("schema", cast(dict[str, Any], schema))
        return cls()


def check_schema(schema: Any) -> str | None:
    """None when `schema` is a usable JSON Schema object, else one line saying why not."""
    if not isinstance(schema, dict):
        return 'A schema must be a JSON object, like {"type": "object"}.'
    try:
        compile_schema(cast(dict[str, Any], schema))
    except ConfigError as exc:
        return _sentence(str(exc))
    return None


def parse_schema_text(text: str) -> tuple[dict[str, Any] | None, str]:
    """The schema typed in the editor, or (None, the one-line error to show under it)."""
    if not text.strip():
        return None, "Type a JSON Schema."
    try:
        value: Any = bounded_loads(text, max_depth=MAX_DEPTH)
    except NestedTooDeep:  # a pasted 100,000-deep value
        return None, f"Not usable: it is nested more than {MAX_DEPTH} levels deep."
    except json.JSONDecodeError as exc:
        return None, f"Not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})."
    error = check_schema(value)
    if error is not None:
        return None, error
    return cast(dict[str, Any], value), ""


def _sentence(text: str) -> str:
    text = " ".join(text.split())
    text = text[:1].upper() + text[1:]
    return text if text.endswith(".") else text + "."
