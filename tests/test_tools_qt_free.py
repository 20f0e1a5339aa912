"""The tool modules of engine/ and the desktop glue for tools never import Qt (fresh interpreter)."""

from __future__ import annotations

import pkgutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_tool_modules_never_import_qt() -> None:
    modules = [f"engine.{pkg}.{m.name}" for pkg in ("reply", "turns", "tools")
               for m in pkgutil.iter_modules([str(ROOT / "engine" / pkg)])]
    modules += ["desktop.chat_tools", "desktop.core.tool_turns"]
    assert "engine.tools.mcp_client" in modules
    code = (
        "import importlib, sys\n"
        f"for name in {modules!r}:\n"
        "    importlib.import_module(name)\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('PySide6', 'qasync', 'shiboken6'))\n"
        "assert not bad, bad\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 0, result.stderr
