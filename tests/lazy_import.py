"""A module imported at its first use, so collecting a test file does not import it (#53).

The API clients the serve tests drive (openai about 1 s of CPU, ollama) are needed only by the
tests that run; `-m "not slow"` or `-k` leaves most of those out, and collection alone paid.
Use it with the real import under TYPE_CHECKING, so pyright still sees the module's types.
"""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType


def lazy_module(name: str) -> ModuleType:
    """`name` as a module that loads itself when an attribute of it is first read."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None:
        raise ModuleNotFoundError(f"No module named {name!r}", name=name)
    loader = importlib.util.LazyLoader(spec.loader)
    spec.loader = loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    loader.exec_module(module)
    return module
