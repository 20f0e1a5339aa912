"""Importing this module loads llama.cpp's shared libraries, before numpy can be loaded.

On some machines a process that imported numpy (or another package that brings its own
native runtime: OpenBLAS, OpenMP, a C++ runtime) before llama.cpp crashes when llama.cpp
later loads a model onto the GPU: a segfault inside `llama_model_load_from_file` on CUDA
(issue #15), the same class of crash llama-cpp-python #1581 and #1903 report on Windows.
Loading llama.cpp first avoids it. It is loaded with the model, not at start-up (issue #23:
`ember --version` must not wait for it): `engine.llama.llama` imports this module, as do
the engine's bench, the documents' vectors (`engine.docs.vectors`, imported only where vectors
are used) and the test suite (`tests/conftest.py`), and no other Ember module
imports numpy (`tests/test_load_order.py` checks every one).

`import llama_cpp` loads `libllama`/`libggml` (in `llama_cpp.llama_cpp`) before its own
`llama_cpp.llama` imports numpy, so the one import is enough.
"""

from __future__ import annotations

import sys

import llama_cpp  # noqa: F401  # pyright: ignore[reportUnusedImport]  (the import loads llama.cpp)


def loaded_before_numpy() -> bool:
    """True when llama.cpp's bindings are loaded and numpy came later or not at all.

    Modules land in `sys.modules` in import order (dicts keep insertion order).
    """
    names = list(sys.modules)
    if "llama_cpp.llama_cpp" not in sys.modules:
        return False
    return "numpy" not in sys.modules or names.index("llama_cpp.llama_cpp") < names.index("numpy")
