"""Servers: an OpenAI-compatible server as a source of models (the window's "Use a server").

Importing this loads httpx, as talking to a server needs.
"""

from __future__ import annotations

from engine.backends.openai import OpenAIBackend, list_models

__all__ = ["OpenAIBackend", "list_models"]
