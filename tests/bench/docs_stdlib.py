"""A real-text corpus for the retrieval set: Python standard-library modules' own docstrings.

The text is the Python Software Foundation's (PSF License, permissive) and ships with every
Python, so the corpus needs nothing downloaded: one Markdown file per module, its docstring
then each public function's and class's under a heading. Docstrings differ a little between
Python versions; the questions (`tests.bench.docs_questions`) ask about what every 3.11+ says.
"""

from __future__ import annotations

import importlib
import inspect
from pathlib import Path

MODULES = (
    "json",
    "csv",
    "heapq",
    "bisect",
    "textwrap",
    "shutil",
    "tempfile",
    "zipfile",
    "gzip",
    "base64",
    "hashlib",
    "hmac",
    "secrets",
    "random",
    "statistics",
    "fractions",
    "difflib",
    "fnmatch",
    "glob",
    "shlex",
    "calendar",
    "pickle",
    "copy",
    "pprint",
    "argparse",
    "sched",
    "queue",
    "subprocess",
    "uuid",
    "ipaddress",
    "colorsys",
    "configparser",
    "contextlib",
    "functools",
    "timeit",
    "tokenize",
    "weakref",
    "getpass",
    "smtplib",
    "ftplib",
    "tarfile",
    "quopri",
    "netrc",
    "mimetypes",
    "linecache",
)


def module_text(name: str) -> str:
    module = importlib.import_module(name)
    parts = [f"# {name}\n\n{inspect.getdoc(module) or ''}\n"]
    for attr, value in sorted(vars(module).items()):
        if attr.startswith("_") or getattr(value, "__module__", None) not in (name, f"_{name}"):
            continue
        if inspect.isroutine(value) or inspect.isclass(value):
            doc = inspect.getdoc(value)
            if doc:
                parts.append(f"## {name}.{attr}\n\n{doc}\n")
    return "\n".join(parts)


def write_corpus(folder: Path) -> list[Path]:
    """One `<module>.md` per module in `folder`; their paths."""
    folder.mkdir(parents=True, exist_ok=True)
    paths: list[Path] = []
    for name in MODULES:
        path = folder / f"{name}.md"
        path.write_text(module_text(name), encoding="utf-8")
        paths.append(path)
    return paths
