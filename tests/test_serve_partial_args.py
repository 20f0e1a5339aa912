"""A cut call's arguments as an object for Ollama: the fields written in full, never a guess."""

from __future__ import annotations

from typing import Any

import pytest

from desktop.serve.partial_args import finished_fields


@pytest.mark.parametrize(
    ("text", "fields"),
    [
        ('{"city": "Paris", "country": "France"}', {"city": "Paris", "country": "France"}),
        ('{"city": "Paris", "coun', {"city": "Paris"}),
        ('{"city": "Paris", "country": "Fr', {"city": "Paris"}),
        ('{"city": "Par', {}),
        ('{"n": 2.1', {}),  # a number may go on: 2.1 could be 2.15
        ('{"n": 2.1, ', {"n": 2.1}),
        ('{"a": "x\\",y", "b', {"a": 'x",y'}),  # an escaped quote and a comma inside a string
        ('{"a": {"b": 1, "c', {"a": {"b": 1}}),
        ('{"a": [1, 2', {"a": [1]}),
        ('{"a": {"b": [1]}, "c": tr', {"a": {"b": [1]}}),
        ("", {}),
        ("{", {}),
        ("not json", {}),
        ('["a", "b"', {}),  # not an object
    ],
)
def test_finished_fields(text: str, fields: dict[str, Any]) -> None:
    assert finished_fields(text) == fields
