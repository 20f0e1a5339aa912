"""Every third-party package Ember's own code imports is declared in pyproject.toml.

A package that only arrives through another dependency (starlette through mcp, numpy through
llama-cpp-python) disappears the day that dependency drops it; declaring it pins the promise.
"""

from __future__ import annotations

import ast
import functools
import importlib.metadata
import re
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OWN = {"desktop", "engine", "models"}
FIRST_PARTY = OWN  # the product never imports tests/ (test_bench_default.py checks)


@functools.cache
def _imported_top_names() -> dict[str, str]:
    """Top-level module name -> the first file importing it (every import, nested ones too)."""
    found: dict[str, str] = {}
    for package in sorted(OWN):
        for path in sorted((ROOT / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Import):
                    names = [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    names = [node.module]
                else:
                    continue
                for name in names:
                    found.setdefault(name.split(".")[0], str(path.relative_to(ROOT)))
    return {
        name: where
        for name, where in found.items()
        if name not in FIRST_PARTY and name not in sys.stdlib_module_names and name not in TYPING_ONLY
    }


# `__future__` is the compiler's; `_typeshed` exists only in the type checker's stdlib stubs, so it
# is imported under `if TYPE_CHECKING:` and never at run time.
TYPING_ONLY = {"__future__", "_typeshed"}


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _declared() -> set[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    return {_normal(re.split(r"[\s;<>=!~\[]", spec, maxsplit=1)[0]) for spec in project["dependencies"]}


def test_every_imported_third_party_package_is_declared() -> None:
    owners = importlib.metadata.packages_distributions()
    declared = _declared()
    undeclared = []
    for name, where in sorted(_imported_top_names().items()):
        distributions = {_normal(d) for d in owners.get(name, [])}
        assert distributions, f"{name} (imported in {where}) is not installed"
        if not distributions & declared:
            undeclared.append(f"{name} ({', '.join(sorted(distributions))}; {where})")
    assert not undeclared, "imported but not in [project] dependencies: " + "; ".join(undeclared)


def test_the_check_sees_the_imports_it_must() -> None:
    names = _imported_top_names()
    assert {"PySide6", "llama_cpp", "starlette", "numpy"} <= names.keys()
    assert "json" not in names and "engine" not in names
