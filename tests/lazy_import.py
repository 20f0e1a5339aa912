"""A module imported at its first use, so collecting a test file does not import it (#53).

The API clients the serve tests drive (openai, ollama, langchain-openai: about 1.4 s of CPU
together) are needed only by the tests that run; `-m "not slow"` or `-k` leaves most of those
out, and collection alone paid. Use it with the real import under TYPE_CHECKING, so pyright
still sees the module's types.

Not importlib's LazyLoader: pytest's collection reads `__wrapped__` and `_mock_name` of every
global of a test module, which would load it; here only a public name loads the module.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any


class _Deferred(ModuleType):
    def __getattr__(self, attr: str) -> Any:  # only for names not yet copied in
        if attr.startswith("_"):  # pytest's probes, dunders: no reason to load
            raise AttributeError(attr)
        module = importlib.import_module(self.__name__)
        self.__dict__.update({k: v for k, v in vars(module).items() if not k.startswith("__")})
        return getattr(module, attr)


def lazy_module(name: str) -> ModuleType:
    """A stand-in for module `name` that imports it when one of its public names is first read."""
    return _Deferred(name)
