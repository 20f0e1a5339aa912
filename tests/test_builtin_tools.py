"""The built-in tools: clock, safe calculator, file tools that cannot escape, history search."""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path

import pytest

from engine.history.store import HistoryStore
from engine.tools.builtin import BUILTIN_NAMES, builtin_tools
from engine.tools.calculator import CalcError, calculate
from engine.tools.files import MAX_READ_BYTES, FolderGrants
from engine.tools.registry import ToolError, ToolSet


def toolset(tmp_path: Path, *folders: Path) -> ToolSet:
    fixed = dt.datetime(2026, 3, 4, 5, 6, 7, tzinfo=dt.timezone(dt.timedelta(hours=1), "CET"))
    return ToolSet(builtin_tools(grants=FolderGrants(folders), history_db=tmp_path / "history.db", now=lambda: fixed))


def test_current_time_gives_date_time_and_zone(tmp_path: Path) -> None:
    assert toolset(tmp_path).run("current_time", {}) == "Wednesday 2026-03-04 05:06:07 CET (UTC+0100)"


@pytest.mark.parametrize(
    ("expression", "value"),
    [
        ("2 * (3 + 4)", 14),
        ("2 ** 10", 1024),
        ("2^8", 256),
        ("7 / 2", 3.5),
        ("7 // 2", 3),
        ("-3 % 5", 2),
        ("sqrt(16)", 4.0),
        ("round(pi, 2)", 3.14),
        ("10 ** -2", 0.01),
    ],
)
def test_calculator_computes_arithmetic(expression: str, value: float) -> None:
    assert calculate(expression) == value


@pytest.mark.parametrize(
    "expression",
    [
        "__import__('os').system('true')",
        "open('/etc/passwd')",
        "x",
        "'a' * 3",
        "[1, 2]",
        "(1).__class__",
        "9 ** 9 ** 9",
        "10 ** 100000",
        "2 ** 5000",
        "1 / 0",
        "sqrt(-1)",
        "(-8) ** 0.5",
        "1 +",
        "",
        "1" * 600,
        "lambda: 1",
        "f(x=1)",
    ],
)
def test_calculator_refuses_anything_but_bounded_arithmetic(expression: str) -> None:
    with pytest.raises(CalcError):
        calculate(expression)


def test_calculator_tool_reports_errors_as_tool_errors(tmp_path: Path) -> None:
    tools = toolset(tmp_path)
    assert tools.run("calculator", {"expression": "6 * 7"}) == "42"
    with pytest.raises(ToolError, match="division by zero"):
        tools.run("calculator", {"expression": "1/0"})
    with pytest.raises(ToolError, match="needs the argument"):
        tools.run("calculator", {})


def test_file_tools_are_offered_only_with_a_granted_folder(tmp_path: Path) -> None:
    assert toolset(tmp_path).names == ["current_time", "calculator"]
    (tmp_path / "history.db").touch()
    granted = tmp_path / "docs"
    granted.mkdir()
    assert toolset(tmp_path, granted).names == list(BUILTIN_NAMES)


@pytest.fixture
def tree(tmp_path: Path) -> tuple[Path, Path]:
    """A granted folder with a file, a subfolder, a link out and a secret next to it."""
    granted = tmp_path / "granted"
    (granted / "sub").mkdir(parents=True)
    (granted / "notes.txt").write_text("hello notes", encoding="utf-8")
    (granted / "sub" / "deep.txt").write_text("deep", encoding="utf-8")
    secret = tmp_path / "secret.txt"
    secret.write_text("TOP SECRET", encoding="utf-8")
    (granted / "link.txt").symlink_to(secret)
    (granted / "linkdir").symlink_to(tmp_path)
    return granted, secret


def test_list_and_read_inside_the_granted_folder(tmp_path: Path, tree: tuple[Path, Path]) -> None:
    granted, _ = tree
    tools = toolset(tmp_path, granted)
    listing = tools.run("list_files", {"path": "."})
    assert "notes.txt (11 bytes)" in listing and "sub/" in listing and "link.txt (link, not followed)" in listing
    assert tools.run("read_file", {"path": "notes.txt"}) == "hello notes"
    assert tools.run("read_file", {"path": "sub/deep.txt"}) == "deep"
    assert tools.run("list_files", {"path": "sub"}) == "deep.txt (4 bytes)"


@pytest.mark.parametrize(
    "path",
    [
        "../secret.txt",
        "sub/../../secret.txt",
        "..",
        "link.txt",
        "linkdir/secret.txt",
        "linkdir",
        "/etc/passwd",
        "~/secret.txt",
        "C:\\Windows\\win.ini",
        "sub\\..\\..\\secret.txt",
        "missing.txt",
    ],
)
def test_file_tools_refuse_every_escape(tmp_path: Path, tree: tuple[Path, Path], path: str) -> None:
    granted, secret = tree
    tools = toolset(tmp_path, granted)
    for name in ("read_file", "list_files"):
        with pytest.raises(ToolError):
            tools.run(name, {"path": path})
    assert secret.read_text(encoding="utf-8") == "TOP SECRET"


def test_an_absolute_path_is_refused_even_inside_the_grant(tmp_path: Path, tree: tuple[Path, Path]) -> None:
    granted, _ = tree
    with pytest.raises(ToolError, match="relative"):
        toolset(tmp_path, granted).run("read_file", {"path": str(granted / "notes.txt")})


def test_read_file_is_size_capped_and_refuses_binary_and_fifos(tmp_path: Path, tree: tuple[Path, Path]) -> None:
    granted, _ = tree
    (granted / "big.txt").write_text("a" * (MAX_READ_BYTES + 10), encoding="utf-8")
    (granted / "blob.bin").write_bytes(b"\x00\x01\x02")
    tools = toolset(tmp_path, granted)
    text = tools.run("read_file", {"path": "big.txt"})
    assert text.startswith("a" * 100) and text.endswith(f"[file cut: only the first {MAX_READ_BYTES} bytes were read]")
    with pytest.raises(ToolError, match="not a text file"):
        tools.run("read_file", {"path": "blob.bin"})
    if hasattr(os, "mkfifo"):
        os.mkfifo(granted / "pipe")
        with pytest.raises(ToolError, match="not a regular file"):
            tools.run("read_file", {"path": "pipe"})  # returns at once: never blocks on the pipe


def test_several_grants_are_named_by_their_folder(tmp_path: Path, tree: tuple[Path, Path]) -> None:
    granted, _ = tree
    other = tmp_path / "other"
    other.mkdir()
    (other / "x.txt").write_text("x", encoding="utf-8")
    tools = toolset(tmp_path, granted, other)
    assert tools.run("list_files", {"path": ""}) == "granted/\nother/"
    assert tools.run("read_file", {"path": "other/x.txt"}) == "x"
    with pytest.raises(ToolError, match="not a granted folder"):
        tools.run("read_file", {"path": "x.txt"})


def test_search_conversations_searches_the_users_history(tmp_path: Path) -> None:
    db = tmp_path / "history.db"
    with HistoryStore(db) as store:
        conv = store.create_conversation(title="Sourdough")
        store.add_message(conv.id, "user", "How long should the levain rest?", parent_id=None)
    tools = toolset(tmp_path)
    assert "search_conversations" in tools
    found = tools.run("search_conversations", {"query": "levain"})
    assert found == "- Sourdough: How long should the levain rest?"
    assert tools.run("search_conversations", {"query": "pizza"}) == "No conversation matches 'pizza'."
