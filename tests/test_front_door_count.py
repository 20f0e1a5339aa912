"""How many engine/models modules the front ends import (issue #47 aims at 15): a ratchet.

`from X import Y` counts X.Y when Y is a module, else X; `import X` counts X. Every `engine`
or `models` module named anywhere under desktop/ counts once, engine.api's own included.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# 76 before the front door grew documents, downloads, the machine and what a model file is, 41 after;
# 14 once the session, the models library and the rest moved behind engine.api. Never raise it.
CEILING = 14


def _is_module(dotted: str) -> bool:
    path = ROOT.joinpath(*dotted.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def _imported(node: ast.AST) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
        names = (f"{node.module}.{alias.name}" for alias in node.names)
        return [name if _is_module(name) else node.module for name in names]
    return []


def front_end_modules() -> set[str]:
    found: set[str] = set()
    for file in (ROOT / "desktop").rglob("*.py"):
        for node in ast.walk(ast.parse(file.read_text(encoding="utf-8"))):
            found.update(n for n in _imported(node) if n.split(".")[0] in ("engine", "models"))
    return found


def test_the_front_ends_import_no_more_engine_modules_than_the_ceiling() -> None:
    modules = front_end_modules()
    assert len(modules) <= CEILING, f"{len(modules)} > {CEILING}: {sorted(m for m in modules if '.api.' not in m)}"


def test_the_count_sees_module_imports_and_names() -> None:
    tree = ast.parse("from engine.api import machine\nfrom models.text import escaped\nimport engine.errors")
    assert [n for node in ast.walk(tree) for n in _imported(node)] == [
        "engine.api.machine",
        "models.text",
        "engine.errors",
    ]
