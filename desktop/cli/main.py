"""The `ember` command: the GUI by default, plus its subcommands (`SUBCOMMANDS`: chat, docs, serve, …).

Subcommands live in `desktop/cli/cmd_<name>.py`, each exposing `register(subparsers)`; none of
them imports Qt, so the CLI works without a display.

Start-up imports only what the command line asks for: `ember --version` and `ember --help`
import no subcommand, and `ember history …` imports `cmd_history` alone (no llama.cpp, numpy,
Qt or MCP SDK); the other subcommands are listed by name and summary only. llama.cpp is
loaded where a model is (`engine.llama.llama` imports `engine.llama.llama_first`), and
nothing in Ember imports numpy except llama.cpp itself, so the load order holds on every path
(tests/test_load_order.py, tests/test_lazy_start.py).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Iterable, Sequence

from desktop.cli.arg_checks import prompt_arg
from desktop.cli.common import fail
from desktop.cli.guard import prepare_streams, run_guarded
from engine.api.text import cell

# Each subcommand's one-line summary for `ember --help` (tests/test_lazy_start.py checks that it
# matches what the subcommand's own `register` says).
SUBCOMMANDS: dict[str, str] = {
    "chat": "send one message and stream the reply",
    "models": "list, search, pull, add or remove models, or describe GGUF files",
    "history": "list, search, export and import recorded conversations",
    "bench": "how fast a model is here, in well under a minute",
    "tools": "list the built-in tools and the MCP servers' tools",
    "docs": "collections of documents to chat with (ember chat --docs NAME)",
    "doctor": "show llama.cpp's build, backends and devices, and whether the GPU is used",
    "serve": "serve the model as a local OpenAI-compatible API",
    "network": "zero-egress mode: show it, allow a destination, turn it on or off",
}
_VALUE_OPTIONS = ("--model", "--backend", "--prompt")  # the top-level options that take a value


class _Parser(argparse.ArgumentParser):
    """Argument errors: one readable line on stderr, exit status 2, no usage dump."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise SystemExit(fail(cell(message)))  # parsing runs before prepare_streams


class _Version(argparse.Action):
    """`ember 0.2.0; llama-cpp-python 0.3.36 (libllama 0.5.0, ggml 0.25.3); CPU variant haswell (…)`.

    Read from files alone (package metadata, the library names, the CPU probe's cache): llama.cpp
    is not loaded, so this stays as quick as the rest of the start-up."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: object,
        option_string: str | None = None,
    ) -> None:
        from engine.api import machine
        from engine.api.program import __version__  # with logging and paths: not on every start

        print(f"ember {__version__}; {machine.llama_build()}; {machine.variant_line()}")
        parser.exit()


def build_parser(commands: Iterable[str] = SUBCOMMANDS) -> argparse.ArgumentParser:
    """The `ember` parser with `commands` registered in full (their modules imported).

    Every other subcommand is a placeholder that only carries its name and summary.
    """
    full = set(commands)
    parser = _Parser(prog="ember", description="Ember: offline chat with local GGUF models.")
    parser.add_argument(
        "--version",
        action=_Version,
        nargs=0,
        help="show the version, llama.cpp's build and the CPU variant in use, and exit",
    )
    parser.add_argument("--model", help="GGUF file to open (default: the last used, else the built-in model)")
    parser.add_argument("--backend", default=None, help="llama (default), script:FILE or openai:URL")
    parser.add_argument("--prompt", type=prompt_arg, help="send this message once the window is up")
    parser.add_argument("-v", "--verbose", action="store_true", help="also log to stderr")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name, summary in SUBCOMMANDS.items():
        if name in full:
            importlib.import_module(f"desktop.cli.cmd_{name}").register(sub)
        else:
            sub.add_parser(name, help=summary)
    return parser


def chosen_command(argv: Sequence[str]) -> str | None:
    """The subcommand `argv` names (its first word that is not a top-level option or its value)."""
    words = iter(argv)
    for word in words:
        if word == "--":
            break
        if word in _VALUE_OPTIONS:
            next(words, None)
        elif not word.startswith("-"):
            return word if word in SUBCOMMANDS else None
    return None


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """Parse `argv`, importing only the subcommand it names."""
    words = list(sys.argv[1:] if argv is None else argv)
    chosen = chosen_command(words)
    args = build_parser(() if chosen is None else (chosen,)).parse_args(words)
    if args.command is not None and not hasattr(args, "func"):  # the guess missed: read it again in full
        args = build_parser().parse_args(words)
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    from engine.api import network as network_guard
    from engine.api.program import ember_paths

    # Zero-egress mode (engine/network): every connection this process tries is checked first.
    with network_guard.enforced(network_guard.guard_for(ember_paths())):
        return _dispatch(args)


def _dispatch(args: argparse.Namespace) -> int:
    if args.command is None:
        from engine.api.program import configure_logging

        configure_logging(verbose=args.verbose)
        from desktop.qt.app import run_gui  # Qt is imported only for the window

        return run_gui(args)
    with prepare_streams():  # no encoding errors, no terminal control characters
        return run_guarded(lambda: _run_command(args))


def _run_command(args: argparse.Namespace) -> int:
    from engine.api.program import configure_logging

    configure_logging(verbose=args.verbose)
    return int(args.func(args))


if __name__ == "__main__":
    raise SystemExit(main())
