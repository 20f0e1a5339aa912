"""Entry point of the frozen app (PyInstaller): the same `ember` command as `desktop.cli.main:main`.

In the frozen app `sys.executable` is this program, not a Python interpreter. Code that runs
`[sys.executable, "-c", CODE, ARG...]` for a fresh process (`ember bench` measures model
loading and UI stalls that way) gets the `python -c` behaviour it expects from here.
"""

import multiprocessing
import sys


def _run_python_c(code: str, args: list[str]) -> None:
    sys.argv = ["-c", *args]
    namespace = {"__name__": "__main__", "__builtins__": __builtins__}
    exec(compile(code, "<string>", "exec"), namespace)


if __name__ == "__main__":
    multiprocessing.freeze_support()  # a no-op unless something spawns worker processes
    if getattr(sys, "frozen", False) and len(sys.argv) >= 3 and sys.argv[1] == "-c":
        _run_python_c(sys.argv[2], sys.argv[3:])
        sys.exit(0)

    from desktop.cli.main import main

    sys.exit(main())
