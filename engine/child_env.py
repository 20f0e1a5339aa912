"""How Ember starts a child process that runs one of its own functions: isolated.

A child runs a real function named `module:function` (`function_child`), which reads its
arguments from `sys.argv[1:]` and returns the exit status: linted, type-checked and covered like
any other code. Its transport is a fixed one-line `python -c` launcher that imports it.

For `-c`, Python puts the working directory first on `sys.path`, so an `engine/` package or a
`struct.py` in the folder where the user runs `ember` would be imported by the child instead of
Ember's own (outside the zero-egress hook, with the user's rights). So every child starts with
`-I` (isolated mode: no working directory or script folder on the path, no `PYTHON*` variables,
no user site), gets this process's own import path back explicitly (this checkout first, then
the entries it was started with, less the working directory), and runs in a fixed folder.

    child = function_child("engine.llama.grammar_guard:run_child", str(path))
    subprocess.run(child.argv, env=child.env, cwd=child.cwd, ...)

The frozen app answers `-c` itself (packaging/ember_main.py) and skips `-I` there.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parent.parent  # the folder holding `engine`, `models` and `desktop`
ISOLATED = "-I"  # no cwd on sys.path, PYTHON* variables and the user site ignored (Python 3.4+)


class PythonChild(NamedTuple):
    argv: list[str]  # [python, -I, -c, CODE, *args]
    env: dict[str, str]
    cwd: str  # a folder the user's current directory cannot replace


def python_child(
    code: str, *args: str, python: str | None = None, env: Mapping[str, str] | None = None, **extra: str
) -> PythonChild:
    """An isolated `python -c code args` child that imports this process's modules, not the cwd's.

    `env` replaces os.environ as the base environment; `extra` is added to it.
    """
    child_env = dict(os.environ if env is None else env)
    child_env.update(extra)
    argv = [python or sys.executable, ISOLATED, "-c", _path_prelude() + code, *args]
    return PythonChild(argv, child_env, str(ROOT))


def function_child(
    target: str, *args: str, python: str | None = None, env: Mapping[str, str] | None = None, **extra: str
) -> PythonChild:
    """An isolated child that imports `module` and exits with `function()`'s return value."""
    module, _, function = target.partition(":")
    if not (module and function.isidentifier()):
        raise ValueError(f"not a module:function target: {target!r}")
    launcher = f"from {module} import {function} as main; raise SystemExit(main())"
    return python_child(launcher, *args, python=python, env=env, **extra)


def import_path() -> list[str]:
    """This checkout, then this process's own import path less the working directory."""
    here = os.path.realpath(os.getcwd()) if _has_cwd() else ""
    out = [str(ROOT)]
    for entry in sys.path:
        if entry and os.path.isabs(entry) and os.path.realpath(entry) != here and entry not in out:
            out.append(entry)
    return out


def _has_cwd() -> bool:
    try:
        os.getcwd()
    except OSError:  # the folder was removed under us
        return False
    return True


def _path_prelude() -> str:
    return f"import sys; sys.path[:0] = [p for p in {import_path()!r} if p not in sys.path]\n"


def child_env(**extra: str) -> dict[str, str]:
    """os.environ plus `extra`, for children that are not `python -c` (their path comes from -I's prelude)."""
    env = dict(os.environ)
    env.update(extra)
    return env
