"""The pieces of a turn that `ember serve` still puts together itself.

Its raw completions, forced tool calls and `response_format` schemas are built here rather than
by the session: a stop-sequence matcher, the system-message fold, the tool-call grammar, and a
JSON schema compiled to a grammar. Until the server runs every turn through the session (#47),
these are the only turn internals a front end touches.
"""

from __future__ import annotations

from engine.backends.stops import StopMatcher
from engine.turns.rounds import fold_system
from engine.turns.structured import compile_schema
from engine.turns.tool_grammar import call_grammar

__all__ = ["StopMatcher", "call_grammar", "compile_schema", "fold_system"]
