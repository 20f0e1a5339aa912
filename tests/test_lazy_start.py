"""Start-up imports only what a command uses (issue #23).

`ember --version`, `--help`, `history` and `models` never import llama.cpp, numpy, Qt or the
MCP SDK; each is run in a fresh interpreter through the real entry point and its modules
are read at exit.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from desktop.cli.main import SUBCOMMANDS, build_parser, chosen_command, parse_args

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("llama_cpp", "numpy", "PySide6", "shiboken6", "mcp", "pydantic")

RUN = (
    "import json, sys\n"
    "from desktop.cli.main import main\n"
    "try:\n"
    "    status = main(sys.argv[1:])\n"
    "except SystemExit as exc:\n"
    "    status = exc.code\n"
    "roots = sorted({name.split('.')[0] for name in sys.modules})\n"
    "sys.stderr.write('\\nMODULES ' + json.dumps([status, roots]) + '\\n')\n"
)


def _modules_after(args: list[str], home: Path) -> tuple[int, set[str], str]:
    env = {**os.environ, "EMBER_HOME": str(home)}
    result = subprocess.run(
        [sys.executable, "-c", RUN, *args], capture_output=True, text=True, cwd=ROOT, env=env, timeout=120, check=False
    )
    line = next(line for line in result.stderr.splitlines() if line.startswith("MODULES "))
    status, roots = json.loads(line.removeprefix("MODULES "))
    return status, set(roots), result.stdout


@pytest.mark.slow
@pytest.mark.parametrize(
    "args",
    [
        ["--version"],
        ["--help"],
        ["history", "list"],
        ["history", "--help"],
        ["models", "--json"],
        ["tools", "--help"],
        ["chat", "--help"],
        ["docs", "--help"],
        ["docs", "list"],
    ],
)
def test_a_command_imports_only_what_it_uses(args: list[str], tmp_path: Path) -> None:
    status, roots, stdout = _modules_after(args, tmp_path)
    assert status in (0, None), stdout
    assert not roots & set(HEAVY), f"ember {' '.join(args)} imported {sorted(roots & set(HEAVY))}"


@pytest.mark.slow
def test_the_window_starts_without_llama_cpp_or_numpy(tmp_path: Path) -> None:
    # Everything the window imports before its first paint (desktop.qt.app builds it, documents UI
    # included); llama.cpp and numpy come with the model load or a search with vectors.
    code = (
        "import json, sys\nimport desktop.qt.app\n"
        "print(json.dumps(sorted({name.split('.')[0] for name in sys.modules})))\n"
    )
    env = {**os.environ, "EMBER_HOME": str(tmp_path), "QT_QPA_PLATFORM": "offscreen"}
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, env=env, timeout=120, check=True
    )
    roots = set(json.loads(result.stdout.splitlines()[-1]))
    assert "PySide6" in roots and "engine" in roots  # the check saw the window's imports
    assert not roots & {"llama_cpp", "numpy"}, sorted(roots & {"llama_cpp", "numpy"})


@pytest.mark.slow  # starts a process
def test_the_check_sees_a_heavy_import(tmp_path: Path) -> None:
    # `doctor` asks llama.cpp about its build: it must show up in the same check.
    _status, roots, _out = _modules_after(["doctor", "--json"], tmp_path)
    assert "llama_cpp" in roots


def test_version_prints_without_any_subcommand(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        parse_args(["--version"])
    assert exc.value.code == 0
    assert capsys.readouterr().out.startswith("ember ")


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        ([], None),
        (["history", "list"], "history"),
        (["-v", "chat", "hello"], "chat"),
        (["--model", "chat", "models"], "models"),  # a model file named like a command is a value
        (["--model=chat", "history"], "history"),
        (["--prompt", "history"], None),  # the window, with a first message
        (["--", "chat"], None),
        (["nonsense"], None),
    ],
)
def test_the_command_is_found_before_parsing(argv: list[str], expected: str | None) -> None:
    assert chosen_command(argv) == expected


def test_the_lazy_listing_matches_the_full_one() -> None:
    # `ember --help` lists every command from main's table; each command's own parser says the same.
    assert build_parser(()).format_help() == build_parser().format_help()
    assert list(SUBCOMMANDS) == ["chat", "models", "history", "bench", "tools", "docs", "doctor", "serve", "network"]


def test_a_command_parses_the_same_lazily_or_in_full() -> None:
    argv = ["chat", "--model", "m.gguf", "--ctx", "512", "hi"]
    lazy, full = parse_args(argv), build_parser().parse_args(argv)
    assert {k: v for k, v in vars(lazy).items() if k != "func"} == {k: v for k, v in vars(full).items() if k != "func"}
    assert lazy.func.__module__ == "desktop.cli.cmd_chat"


@pytest.mark.slow
def test_the_packaged_app_entry_is_as_lazy(tmp_path: Path) -> None:
    code = (
        "import json, runpy, sys\nsys.argv = ['ember', '--version']\n"
        "try:\n    runpy.run_path('packaging/ember_main.py', run_name='__main__')\nexcept SystemExit:\n    pass\n"
        "print(json.dumps(sorted({name.split('.')[0] for name in sys.modules})))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "EMBER_HOME": str(tmp_path)},
        timeout=120,
        check=True,
    )
    roots = set(json.loads(result.stdout.splitlines()[-1]))
    assert result.stdout.startswith("ember ") and not roots & set(HEAVY)


def test_warm_up_imports_on_a_thread() -> None:
    from desktop.qt.app import warm_up

    thread = warm_up(("json", "no_such_module_for_ember"))
    thread.join(timeout=30)
    assert not thread.is_alive() and "json" in sys.modules


# The Add server dialog's HTTP client (OpenAI-compatible servers) and the Serve toggle's ASGI
# stack: loaded when they are used, not at start.
WINDOW_LATE = ("httpx", "rich", "uvicorn", "starlette", "sse_starlette")

WINDOW_RUN = (
    "import json, sys\n"
    "from tests.tools import startup_probe\n"
    "say = startup_probe._say\n"
    "def noted(line):\n"
    "    roots = sorted({name.split('.')[0] for name in sys.modules})\n"
    "    sys.stderr.write('MODULES ' + json.dumps([line.split(' ')[0], roots]) + '\\n')\n"
    "    say(line)\n"
    "startup_probe._say = noted\n"
    "raise SystemExit(startup_probe.main())\n"
)


@pytest.mark.slow
def test_the_window_starts_without_the_server_dialogs_imports(tmp_path: Path) -> None:
    # `ember` as a user starts it (offscreen, built-in model): at its first paint and once the
    # model is ready, the HTTP client (and rich, which it pulls in) and the API server's stack are not loaded.
    env = {**os.environ, "EMBER_HOME": str(tmp_path), "QT_QPA_PLATFORM": "offscreen"}
    result = subprocess.run(
        [sys.executable, "-c", WINDOW_RUN], capture_output=True, text=True, cwd=ROOT, env=env, timeout=300, check=False
    )
    moments = dict(
        json.loads(line.removeprefix("MODULES ")) for line in result.stderr.splitlines() if line.startswith("MODULES ")
    )
    assert set(moments) == {"painted", "ready"}, result.stderr[-2000:]
    for moment, roots in moments.items():
        assert not set(roots) & set(WINDOW_LATE), f"{moment}: {sorted(set(roots) & set(WINDOW_LATE))}"
        assert "PySide6" in roots  # the check sees the window's own imports
