"""`python -m MODULE ARGS` for a test or bench child that uses llama.cpp itself (llama-cpp-python's
server): with run-time CPU variants nothing would register a CPU backend there, or llama.cpp's
own pick by score would (the variant that traps on a VM that reports AMX)."""

from __future__ import annotations

import runpy
import sys

from engine.child_env import PythonChild, function_child


def module_command(module: str, *args: str) -> PythonChild:
    return function_child("tests.llama_child:run_module", module, *args)


def run_module() -> int:
    """In the child: argv MODULE ARGS. The chosen variant registered, then MODULE run as __main__."""
    from engine.llama.cpu import ensure_backends

    module = sys.argv[1]
    ensure_backends()
    sys.argv[:2] = [module]
    runpy.run_module(module, run_name="__main__", alter_sys=True)
    return 0
