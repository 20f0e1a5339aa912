"""What every bench script shares: a timed line on stderr, the run's date, and its JSON report
(printed, and written to `--json` where given)."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any


def say(line: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {line}", file=sys.stderr, flush=True)


def dated(**figures: Any) -> dict[str, Any]:
    """A report that starts with when it was measured."""
    return {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())} | figures


def emit(result: dict[str, Any], path: Path | None, shown: dict[str, Any] | None = None) -> int:
    """Write the whole report to `path` (if any) and print `shown` (the whole report by default)."""
    if path is not None:
        path.write_text(json.dumps(result, indent=2, ensure_ascii=False), encoding="utf-8")
    print(json.dumps(result if shown is None else shown, indent=2, ensure_ascii=False))
    return 0
