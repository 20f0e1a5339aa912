"""The download part of `ember bench` (measured in `tests.bench.download`): Ember's download against curl.

`--no-download` leaves it out; `--download-mb N` sets the file's size (100 by default, 20 with `--quick`).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from engine.errors import EngineError
from tests.bench.download import FIELDS, measure_download


def collect(args: argparse.Namespace, say: Callable[[str], None], notes: list[str]) -> dict[str, Any]:
    if args.no_download:
        return {}
    size = args.download_mb or (20 if args.quick else 100)
    try:
        return measure_download(size, 2 if args.quick else 3, notes, say)
    except (EngineError, OSError) as exc:  # e.g. no room in the temporary folder for the file
        notes.append(f"download: {exc}")
        return dict.fromkeys(FIELDS)


def report_rows(r: dict[str, Any], row: Callable[[str, str], str]) -> list[str]:
    if r.get("download_vs_curl_ratio") is None:
        return []
    return [
        row(
            "download vs curl",
            f"x{r['download_vs_curl_ratio']} ({r['download_mb_per_s']} MB/s hashed and "
            f"synced to disk vs curl {r['curl_mb_per_s']} MB/s, {r['download_file_mb']} MB over loopback); "
            f"x{r['download_vs_curl_synced_ratio']} against curl + sync; SHA-256 {r['hash_overhead_pct']} % "
            f"of the time",
        )
    ]
