"""The `ember` command: the GUI by default, plus its subcommands (`SUBCOMMANDS`: chat, docs, serve, …).

Subcommands live in `desktop/cli/cmd_<name>.py`, each exposing `register(subparsers)`; none of
them imports Qt, so the CLI starts fast and works without a display.
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Sequence

import engine.backends.llama_first  # noqa: F401  # pyright: ignore[reportUnusedImport]  (llama.cpp before numpy)
from desktop.cli.arg_checks import prompt_arg
from desktop.cli.common import fail
from desktop.cli.guard import prepare_streams, run_guarded
from desktop.core.terminal_text import safe_cell
from engine import __version__
from engine.logsetup import configure_logging

SUBCOMMANDS = ("chat", "models", "history", "bench", "tools", "docs", "doctor", "serve", "network")


class _Parser(argparse.ArgumentParser):
    """Argument errors: one readable line on stderr, exit status 2, no usage dump."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise SystemExit(fail(safe_cell(message)))  # parsing runs before prepare_streams


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="ember", description="Ember: offline chat with local GGUF models.")
    parser.add_argument("--version", action="version", version=f"ember {__version__}")
    parser.add_argument("--model", help="GGUF file to open (default: the last used, else the built-in model)")
    parser.add_argument("--backend", default=None, help="llama (default), script:FILE or openai:URL")
    parser.add_argument("--prompt", type=prompt_arg, help="send this message once the window is up")
    parser.add_argument("-v", "--verbose", action="store_true", help="also log to stderr")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name in SUBCOMMANDS:
        module = importlib.import_module(f"desktop.cli.cmd_{name}")
        module.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    from engine.network import guard as network_guard
    from models.library.paths import ember_paths

    # Zero-egress mode (engine/network): every connection this process tries is checked first.
    with network_guard.enforced(network_guard.guard_for(ember_paths())):
        return _dispatch(args)


def _dispatch(args: argparse.Namespace) -> int:
    if args.command is None:
        configure_logging(verbose=args.verbose)
        from desktop.qt.app import run_gui  # Qt is imported only for the window

        return run_gui(args)
    with prepare_streams():  # no encoding errors, no terminal control characters
        return run_guarded(lambda: _run_command(args))


def _run_command(args: argparse.Namespace) -> int:
    configure_logging(verbose=args.verbose)
    return int(args.func(args))


if __name__ == "__main__":
    raise SystemExit(main())
