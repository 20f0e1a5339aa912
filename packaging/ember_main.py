"""Entry point of the frozen app (PyInstaller): the same `ember` command as `desktop.cli.main:main`.

In the frozen app `sys.executable` is this program, not a Python interpreter. A child process
that runs one of Ember's functions (`engine.child_env.function_child`: the grammar checker, the
CPU probes, the stop watchdog, the MCP sandbox's launcher, `ember bench`) is started as
`[sys.executable, "-I", "-c", LAUNCHER, ARG...]` and gets the `python -c` behaviour it expects
from here. Interpreter flags before `-c` are accepted and skipped: the
frozen app's import path never holds the working directory anyway, so `-I` and `-P` already hold.
"""

import multiprocessing
import sys

# Flags without a value that engine/child_env.py (or a user) may put before `-c`.
_FLAGS = frozenset({"-I", "-P", "-E", "-s", "-S", "-B", "-u", "-q", "-O", "-OO"})


def _python_c(argv: list[str]) -> tuple[str, list[str]] | None:
    """(code, args) when argv asks for `[FLAGS...] -c CODE ARGS...`; else None."""
    i = 1
    while i < len(argv) and argv[i] in _FLAGS:
        i += 1
    if i + 1 < len(argv) and argv[i] == "-c":
        return argv[i + 1], argv[i + 2 :]
    return None


def _run_python_c(code: str, args: list[str]) -> None:
    sys.argv = ["-c", *args]
    namespace = {"__name__": "__main__", "__builtins__": __builtins__}
    exec(compile(code, "<string>", "exec"), namespace)


if __name__ == "__main__":
    multiprocessing.freeze_support()  # a no-op unless something spawns worker processes
    wanted = _python_c(sys.argv) if getattr(sys, "frozen", False) else None
    if wanted is not None:
        _run_python_c(*wanted)
        sys.exit(0)

    from desktop.cli.main import main

    sys.exit(main())
