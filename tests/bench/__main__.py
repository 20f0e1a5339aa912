"""`python -m tests.bench`: the long comparisons, from a source checkout (never the product).

Ember next to raw llama-cpp-python and native llama.cpp, the GUI under load, long chats,
documents, the API server, start-up and downloads (`tests.bench.full`). With `--beside-quick
--llama-bench PATH` it runs `ember bench`'s quick measurement instead and puts native
llama.cpp's figures beside it (`tests.bench.native.beside_quick`). `ember bench` itself is the
quick bench only: the product never imports `tests/`.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from desktop.cli import cmd_bench
from engine.errors import EngineError
from models.errors import EmberError


def non_negative(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}")
    return value


def executable_arg(text: str) -> Path:
    """A program to run later: checked now, so a long job never starts only to fail at the end."""
    path = Path(text).expanduser()
    if not path.is_file():
        raise argparse.ArgumentTypeError(f"{text} does not exist or is not a file")
    if not os.access(path, os.X_OK):
        raise argparse.ArgumentTypeError(f"{text} is not executable")
    return path


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m tests.bench", description="The long comparisons (tests/bench), from a source checkout."
    )
    cmd_bench.add_common(p)
    p.add_argument("--quick", action="store_true", help="fewer runs, shorter replies")
    p.add_argument(
        "--llama-bench", type=executable_arg, default=None, metavar="PATH", help="a built llama.cpp llama-bench binary"
    )
    p.add_argument("--beside-quick", action="store_true", help="native llama-bench beside `ember bench`'s figures")
    p.add_argument("--draft-model", type=Path, default=None, metavar="PATH", help="a GGUF for speculative decoding")
    p.add_argument("--docs-big-file-mb", type=int, default=0, metavar="MB", help="also index a text file this big")
    p.add_argument("--no-docs", action="store_true", help="leave out the documents benchmarks")
    p.add_argument("--download-mb", type=int, default=None, metavar="MB", help="the download benchmark's file size")
    p.add_argument("--no-download", action="store_true", help="leave out the download benchmark")
    for flag in ("--runs", "--max-tokens", "--gui-tokens", "--filter-bytes", "--history-messages",
                 "--startup-runs", "--long-chat-turns", "--scale-messages", "--serve-runs"):  # fmt: skip
        p.add_argument(flag, type=non_negative, default=None, help="(a tiny run for the test suite)")
    p.add_argument("--skip-decoding", action="store_true", help="(a tiny run for the test suite)")
    return p


def beside_quick(args: argparse.Namespace) -> int:
    """`ember bench`'s report with native llama-bench's figures beside it."""
    from engine.bench.quick import MAX_TOKENS
    from tests.bench.native import beside_quick as native_beside

    try:
        report = cmd_bench.collect(args)
    except (EngineError, EmberError, FileNotFoundError, RuntimeError) as exc:
        sys.stderr.write(f"bench failed: {exc}\n")
        return cmd_bench.EXIT_FAILED
    model = Path(report["model_path"])
    native: dict[str, Any] = native_beside(
        args.llama_bench, model, report["threads"], report, report["notes"], MAX_TOKENS
    )
    report.update(native)
    sys.stdout.write((json.dumps(report, ensure_ascii=False) if args.json else cmd_bench.format_report(report)) + "\n")
    return cmd_bench.EXIT_OK


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.beside_quick:
        if args.llama_bench is None:
            sys.stderr.write("--beside-quick needs --llama-bench PATH\n")
            return cmd_bench.EXIT_FAILED
        return beside_quick(args)
    from tests.bench.full import run

    return run(args)


if __name__ == "__main__":
    sys.exit(main())
