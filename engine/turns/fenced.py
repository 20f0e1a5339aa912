"""How a structured turn's value is shown and stored: a fenced ```json block, pretty-printed.

Apart from `engine.turns.structured` (which needs jsonschema) so the history recorder and
`ember history` do not import a JSON Schema validator to store or show a value.
"""

from __future__ import annotations

import json
from typing import Any


def fenced_json(value: Any) -> str:
    """A value as the app shows and stores it: a fenced ```json block, pretty-printed."""
    return "```json\n" + json.dumps(value, indent=2, ensure_ascii=False) + "\n```"
