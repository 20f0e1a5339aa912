"""`ember models search TEXT` and `ember models pull REPO[:FILE|QUANT]`: the Hub from the command line.

    ember models search qwen2.5 7b instruct        # GGUF repositories, most downloaded first
    ember models pull bartowski/Qwen2.5-7B-Instruct-GGUF:Q4_K_M
    ember models pull REPO --json                  # progress on stderr, one JSON object on stdout

Zero-egress mode stays on: the first search or pull asks once whether downloads from the
Hub's host may be allowed (`--allow` says yes up front; without a terminal and without
`--allow` it explains and exits with status 2). A catalogue vision model's pull brings its
image projector (`mmproj*.gguf`) into the same folder, as one download. A pull shows a bar with speed and time left
on stderr (or how long the server has been silent, and no time left); Ctrl+C cancels and keeps the `.part` files,
and the same pull resumes them. "SHA-256 checked" is said only of files the Hub gave a digest for. Every string
the Hub supplied (file names in lines and errors) is shown escaped, on one line.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

from desktop.cli.common import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE, fail
from desktop.core.get_models import DownloadChoiceError, progress_text, projector_to_fetch
from engine.api.downloads import (
    HubClient,
    HubError,
    HubFile,
    Progress,
    allow_downloads,
    consent_question,
    default_models_dir,
    download,
    downloads_allowed,
    parse_spec,
    pick_files,
    refusal_line,
    total_size,
)
from engine.api.library import CatalogueEntry, CatalogueError, entry_for_repo, shipped_catalogue
from engine.api.models import format_bytes
from engine.api.program import EmberPaths, ember_paths
from engine.api.text import cell

BAR_WIDTH = 24


def search(text: str, *, as_json: bool, allow: bool, limit: int) -> int:
    try:
        paths, client = ember_paths(), HubClient()
    except HubError as exc:
        return _fail(str(exc), EXIT_USAGE)
    if not _consented(paths, client, allow):
        return fail(refusal_line(client))
    try:
        repos = client.search(text, limit=limit)
    except HubError as exc:
        return _fail(str(exc), EXIT_FAILED)
    if as_json:
        rows = [{"repo": r.repo, "downloads": r.downloads, "likes": r.likes, "gated": r.gated} for r in repos]
        sys.stdout.write(json.dumps(rows, ensure_ascii=False) + "\n")
    elif repos:
        from desktop.cli.table import format_table

        rows = [(r.repo, f"{r.downloads:,}", f"{r.likes:,}", "gated" if r.gated else "") for r in repos]
        print(format_table(rows, ("REPOSITORY", "DOWNLOADS", "LIKES", "ACCESS")))
    else:
        print(f"No GGUF repositories match {text!r}.")
    return EXIT_OK


def pull(spec: str, *, as_json: bool, allow: bool) -> int:
    try:
        paths, client = ember_paths(), HubClient()
        repo, selector = parse_spec(spec)
    except HubError as exc:
        return _fail(str(exc), EXIT_USAGE)
    if not _consented(paths, client, allow):
        return fail(refusal_line(client))
    bar = _Bar(sys.stderr.isatty())
    try:
        listing = client.list_gguf(repo)
        files = pick_files(listing, selector)
        if not any(f.is_projector for f in files):
            # A catalogue vision model comes with its projector, in the same item (one bar, both or neither).
            files += projector_to_fetch(listing, entry_for_repo(_catalogue(), repo))
        _say(
            f"{repo}: {', '.join(cell(f.path) for f in files)} ({format_bytes(total_size(files))}) "
            f"into {default_models_dir(paths)}"
        )
        saved = download(files, default_models_dir(paths), client=client, progress=bar.show)
    except KeyboardInterrupt:
        bar.clear()
        return _fail(
            f"cancelled; the part downloaded is kept, and `ember models pull {spec}` resumes it", EXIT_INTERRUPTED
        )
    except (HubError, DownloadChoiceError) as exc:
        bar.clear()
        return _fail(str(exc), EXIT_FAILED)
    bar.clear()
    _report(files, saved, as_json)
    return EXIT_OK


def _catalogue() -> tuple[CatalogueEntry, ...]:
    """The shipped catalogue, or none when it cannot be read (a pull by repository still works)."""
    try:
        return shipped_catalogue()
    except CatalogueError:
        return ()


def _consented(paths: EmberPaths, client: HubClient, allow: bool) -> bool:
    """Whether the Hub may be reached: allowed before, `--allow`, or a yes typed at the terminal."""
    if downloads_allowed(paths, client):
        return True
    if not allow:
        sys.stderr.write(f"ember: {consent_question(client)}\n")
        if not sys.stdin.isatty():
            return False
        sys.stderr.write("Allow? [y/N] ")
        sys.stderr.flush()
        try:
            answer = input().strip().lower()
        except EOFError:
            return False
        if answer not in ("y", "yes"):
            return False
    allow_downloads(paths, client)
    _say(f"downloads from {client.host} are allowed (ember network remove {client.destination} takes it back)")
    return True


def _report(files: list[HubFile], saved: list[Path], as_json: bool) -> None:
    model = next((p for f, p in zip(files, saved, strict=True) if not f.is_projector), saved[0])
    if as_json:
        out: dict[str, Any] = {
            "repo": files[0].repo,
            "revision": files[0].revision,
            "model": str(model),
            "files": [
                {"path": str(p), "file": f.path, "size": f.size, "sha256": f.sha256, "verified": f.sha256 is not None}
                for f, p in zip(files, saved, strict=True)
            ],
        }
        sys.stdout.write(json.dumps(out, ensure_ascii=False) + "\n")
        return
    print(f"saved {cell(str(model))} ({format_bytes(total_size(files))}, {_checked(files)})")
    for f, p in zip(files, saved, strict=True):
        if f.is_projector:
            print(f"with its image projector {cell(p.name)}, beside it")
    print(f"chat with it: ember chat --model {cell(str(model))}")


def _checked(files: list[HubFile]) -> str:
    """What was verified, truly: the SHA-256 only where the Hub gave one."""
    unchecked = [f for f in files if f.sha256 is None]
    if not unchecked:
        return "SHA-256 checked"
    if len(unchecked) == len(files):
        return "no checksum from the Hub: not verified"
    return "no checksum from the Hub for " + ", ".join(cell(f.name) for f in unchecked)


def _fail(message: str, status: int = EXIT_FAILED) -> int:
    return fail(cell(message), status)


def _say(text: str) -> None:
    sys.stderr.write(f"ember: {text}\n")
    sys.stderr.flush()


class _Bar:
    """The progress bar on stderr: rewritten in place on a terminal, a line per tenth otherwise."""

    def __init__(self, tty: bool) -> None:
        self.tty = tty
        self._shown = False
        self._tenth = -1
        self._last = 0.0

    def show(self, p: Progress) -> None:
        fraction = p.done / p.total if p.total else 1.0
        line = _bar_line(p, fraction)
        if self.tty:
            now = time.monotonic()
            if now - self._last >= 0.1 or p.done >= p.total:
                self._last = now
                sys.stderr.write(f"\r\x1b[K{line}")
                sys.stderr.flush()
                self._shown = True
        elif int(fraction * 10) > self._tenth:
            self._tenth = int(fraction * 10)
            sys.stderr.write(line + "\n")
            sys.stderr.flush()

    def clear(self) -> None:
        if self._shown:
            sys.stderr.write("\r\x1b[K")
            sys.stderr.flush()
            self._shown = False


def _bar_line(p: Progress, fraction: float) -> str:
    """The bar, then the window's own words for the progress (`progress_text`)."""
    filled = int(fraction * BAR_WIDTH)
    text = progress_text(p.done, p.total, p.bytes_per_s, p.seconds_left, p.waiting_s)
    return f"[{'#' * filled}{'.' * (BAR_WIDTH - filled)}] {fraction:4.0%}  {text}  {cell(p.file)[:40]}"
