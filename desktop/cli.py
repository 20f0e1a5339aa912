"""The `ember` command: the GUI by default, plus `chat`, `models`, `history`, `bench`, `doctor`.

Subcommands live in `desktop/cmd_<name>.py`, each exposing `register(subparsers)`; none of
them imports Qt, so the CLI starts fast and works without a display.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from pathlib import Path

import engine.backends.llama_first  # noqa: F401  # pyright: ignore[reportUnusedImport]  (llama.cpp before numpy)
from engine import __version__
from engine.logsetup import configure_logging

SUBCOMMANDS = ("chat", "models", "history", "bench")
# Commands already in `desktop/cli/`, where the CLI is moving (the target layout). Until this
# module moves there too, it lends that folder to submodule imports (`desktop.cli.cmd_doctor`).
__path__ = [str(Path(__file__).with_name("cli"))]
PACKAGED_SUBCOMMANDS = ("doctor",)

EXIT_OK = 0
EXIT_USAGE = 2
EXIT_TURN_ERROR = 3


class _Parser(argparse.ArgumentParser):
    """Argument errors: one readable line on stderr, exit status 2, no usage dump."""

    def error(self, message: str) -> None:  # type: ignore[override]
        sys.stderr.write(f"ember: {message}\n")
        raise SystemExit(EXIT_USAGE)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="ember", description="Ember: offline chat with local GGUF models.")
    parser.add_argument("--version", action="version", version=f"ember {__version__}")
    parser.add_argument("--model", help="GGUF file to open (default: the last used, else the built-in model)")
    parser.add_argument("--backend", default=None, help="llama (default), script:FILE or openai:URL")
    parser.add_argument("--prompt", help="send this message once the window is up")
    parser.add_argument("-v", "--verbose", action="store_true", help="also log to stderr")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name in SUBCOMMANDS:
        module = importlib.import_module(f"desktop.cmd_{name}")
        module.register(sub)
    for name in PACKAGED_SUBCOMMANDS:
        importlib.import_module(f"desktop.cli.cmd_{name}").register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    configure_logging(verbose=args.verbose)
    if args.command is None:
        from desktop.app import run_gui  # Qt is imported only for the window

        return run_gui(args)
    return int(args.func(args))


if __name__ == "__main__":
    raise SystemExit(main())
