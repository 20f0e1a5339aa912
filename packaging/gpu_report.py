"""Write the GPU check's report (Markdown) from the files `packaging/gpu-check.sh` left in a folder.

usage: python3 packaging/gpu_report.py REPORT_DIR > REPORT_DIR/report.md
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

# Issue #15's targets: Ember's decode rate against native llama-bench tg at the same depth.
TARGETS = {"syn135": 0.90, "syn1700": 0.95}
SHAPES = {
    "syn135": "SmolLM2-135M shape, F16",
    "syn1700": "SmolLM2-1.7B shape, F16",
    "syn1700-cpu-sampling": "the same, sampling on the CPU",
}


def _num(value: Any, digits: int = 1) -> str:
    return "n/a" if value is None else f"{value:,.{digits}f}"


def _tail(path: Path, n: int) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").strip().splitlines()[-n:])
    except OSError:
        return f"({path.name} missing)"


def bench_row(name: str, r: dict[str, Any]) -> str:
    ratio = r.get("engine_vs_native_tps_ratio")
    target = TARGETS.get(name)
    verdict = "n/a" if ratio is None or target is None else ("met" if ratio >= target else "MISSED")
    return (
        f"| {name} ({SHAPES.get(name, '?')}) | {r.get('where', '?')} | {_num(r.get('engine_tps'))} | "
        f"{_num(r.get('raw_tps'))} | {_num(r.get('native_tg_tps'))} | {_num(ratio, 3)} "
        f"(pairwise {_num(r.get('native_pairwise_ratio_median'), 3)}) | "
        f"{_num(r.get('engine_vs_raw_tps_ratio'), 3)} | "
        f"{_num(r.get('engine_ttft_ms'))} / {_num(r.get('raw_ttft_ms'))} | "
        f"{target if target is not None else '?'}: {verdict} |"
    )


def bench_section(folder: Path) -> list[str]:
    lines = [
        "| model | runs on | Ember tok/s | raw llama-cpp-python tok/s | native llama-bench tg tok/s | "
        "Ember / native | Ember / raw | TTFT ms Ember / raw | target |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    details: list[str] = []
    for name in ("syn135", "syn1700", "syn1700-cpu-sampling"):
        path = folder / f"bench-{name}.json"
        if name.endswith("cpu-sampling") and not path.is_file():
            continue
        try:
            r: dict[str, Any] = json.loads(path.read_text().strip().splitlines()[-1])
        except (OSError, ValueError, IndexError):
            lines.append(f"| {name} | bench failed: {_tail(folder / f'bench-{name}.log', 1)} |||||||")
            continue
        lines.append(bench_row(name, r))
        details.append(
            f"- {name}: {r.get('runs')} interleaved rounds of {r.get('max_tokens')} tokens, "
            f"native `{r.get('native_test', '?')}`, flash attention {r.get('flash_attn')}; "
            f"Ember runs {r.get('engine_tps_runs')}, native runs {r.get('native_tg_runs')}; "
            f"outputs match raw: {r.get('outputs_match')}; notes: {r.get('notes')}"
        )
    return [*lines, "", *details]


def main(folder: Path) -> None:
    out = [
        "# GPU check",
        "",
        "## ember doctor",
        "```",
        _tail(folder / "doctor.txt", 20),
        "```",
        "",
        "## GPU-marked tests (pytest -m gpu)",
        "```",
        _tail(folder / "pytest.txt", 8),
        "```",
        "",
        "## ember bench, every layer on the GPU, native llama-bench interleaved at the same KV depth",
        "",
        *bench_section(folder),
    ]
    sys.stdout.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
