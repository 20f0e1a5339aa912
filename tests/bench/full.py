"""`python -m tests.bench` (from a source checkout): Ember next to raw llama-cpp-python and native
llama.cpp, the GUI under load, long chats, documents, the API server, start-up and downloads.

`tests/bench/__main__.py` parses the flags (sharing `ember bench`'s own) and hands the run
here. The engine-side measurements come from `tests.bench.suite`. The GUI stall test runs in
a child interpreter (the stall timer, offscreen), so Qt never loads into this process and
cannot disturb the engine's timings. Every figure is reported, never asserted.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from engine.child_env import python_child
from engine.errors import BenchError, EngineError
from tests.bench import cli_docs as bench_docs
from tests.bench import cli_download as bench_download
from tests.bench import cli_long_chat as bench_long_chat
from tests.bench import cli_serve as bench_serve
from tests.bench import cli_startup as bench_startup
from tests.bench import prediction as bench_prediction
from tests.bench.images import measure_images
from tests.bench.suite import BenchConfig, load_average, run_engine_bench

EXIT_OK, EXIT_FAILED = 0, 2
UI_FIELDS = (
    "ui_max_stall_ms",
    "ui_p99_stall_ms",
    "ui_catchup_ms",
    "ui_huge_piece_max_stall_ms",
    "ui_huge_piece_catchup_ms",  # one 1 MB piece
    "ui_card_line_max_stall_ms",
    "ui_paste_line_max_stall_ms",  # a 1 MB line: approval card, paste,
    "ui_send_line_max_stall_ms",
)  # and sending it
UI_TOKENS, UI_TOKENS_QUICK, UI_RATE = 20_000, 4_000, 2_000
STALL_IMPORT = "from tests.tools.stall_bench import measure_ui_stall\n"


def config_from(args: argparse.Namespace) -> BenchConfig:
    model = getattr(args, "model", None)
    draft = args.draft_model.expanduser() if args.draft_model else None
    config = BenchConfig(
        model=Path(model).expanduser() if model else None,
        threads=args.threads,
        llama_bench=args.llama_bench,
        gpu_layers=args.gpu_layers,
        draft_model=draft,
        decode_extras=not args.skip_decoding,
    )
    if args.quick:
        config = config.quick()
    overrides = {
        "runs": args.runs,
        "max_tokens": args.max_tokens,
        "filter_bytes": args.filter_bytes,
        "history_messages": args.history_messages,
    }
    return replace(config, **{k: v for k, v in overrides.items() if v is not None})


def gui_tokens(args: argparse.Namespace) -> int:
    if args.gui_tokens is not None:
        return args.gui_tokens
    return UI_TOKENS_QUICK if args.quick else UI_TOKENS


# -- the GUI under load, in a child process ------------------------------------------------


def measure_gui(n_tokens: int, tokens_per_s: int, notes: list[str]) -> dict[str, Any]:
    """`tests.tools.stall_bench.measure_ui_stall` in an offscreen child; nulls and a note if it fails."""
    result: dict[str, Any] = dict.fromkeys(UI_FIELDS)
    result.update(ui_tokens=n_tokens, ui_tokens_per_s=tokens_per_s)
    if n_tokens <= 0:
        notes.append("GUI stall: skipped")
        return result
    try:
        result.update(_run_stall_child(n_tokens, tokens_per_s))
    except (OSError, RuntimeError, ValueError, BenchError, subprocess.TimeoutExpired) as exc:
        notes.append(f"GUI stall: {exc}")
    return result


def _run_stall_child(n_tokens: int, tokens_per_s: int) -> dict[str, Any]:
    # The long-line cases (a 1 MB line in a card, pasted, sent) are left out of a tiny run (the test suite's).
    line_chars = 1_000_000 if n_tokens >= UI_TOKENS_QUICK else 0
    code = (
        f"import json\n{STALL_IMPORT}"
        f"print(json.dumps(measure_ui_stall(n_tokens={n_tokens}, tokens_per_s={tokens_per_s}, "
        f"line_chars={line_chars})))\n"
    )
    child = python_child(code, QT_QPA_PLATFORM="offscreen")
    done = subprocess.run(
        child.argv,
        capture_output=True,
        text=True,
        check=False,
        env=child.env,
        cwd=child.cwd,
        timeout=n_tokens / tokens_per_s + 120,
    )
    if done.returncode != 0:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise BenchError(f"the stall child failed ({done.returncode}): {tail}")
    data = json.loads(done.stdout.strip().splitlines()[-1])
    return {key: data.get(key) for key in UI_FIELDS}


# -- output --------------------------------------------------------------------------------


def _num(value: Any, unit: str = "", digits: int = 1) -> str:
    if value is None:
        return "n/a"
    return f"{value:,.{digits}f}{unit}"


def _machine_lines(r: dict[str, Any]) -> list[str]:
    load = "" if r.get("load_average") is None else f", load average {r['load_average']}"
    if r.get("load_average_end") is not None:
        load += f" → {r['load_average_end']}"
    return [
        f"Ember bench: {r['model']}",
        f"CPU: {r['cpu']}, {r['threads']} threads ({r['logical_cpus']} logical CPUs{load})",
        f"runs on: {r.get('where', '?')}",
        f"llama-cpp-python {r['llama_cpp_python']}, Python {r['python']}, {r['platform']}",
        "",
    ]


def _speed_rows(r: dict[str, Any]) -> list[str]:
    match = "outputs match" if r["outputs_match"] else "outputs DIFFER"
    rows = [
        f"{'':32}{'Ember engine':>14}{'raw llama-cpp-python':>24}",
        f"{'tokens/s (decode, median)':32}{_num(r['engine_tps']):>14}{_num(r['raw_tps']):>24}",
        f"{'time to first token (ms)':32}{_num(r['engine_ttft_ms']):>14}{_num(r['raw_ttft_ms']):>24}",
        f"{'tokens generated':32}{r['engine_tokens']:>14}{r['raw_tokens']:>24}",
        "",
        _row(
            "Ember / raw tokens/s",
            f"{_num(r['engine_vs_raw_tps_ratio'], digits=3)}  (pairwise median "
            f"{_num(r['pairwise_ratio_median'], digits=3)}; {r['runs']} interleaved runs of "
            f"{r['max_tokens']} tokens; {match})",
        ),
    ]
    if r.get("native_tg_tps") is not None:
        rows += _native_rows(r)
    return rows


def _native_rows(r: dict[str, Any]) -> list[str]:
    label = f"native llama-bench {r.get('native_test', 'tg')}"
    return [
        _row(
            label,
            f"{_num(r['native_tg_tps'])} tokens/s, flash attention {r.get('native_flash_attn', '?')} "
            f"as Ember  (Ember / native {_num(r['engine_vs_native_tps_ratio'], digits=3)}, pairwise median "
            f"{_num(r.get('native_pairwise_ratio_median'), digits=3)})",
        )
    ]


def _vulkan_row(r: dict[str, Any]) -> list[str]:
    ratio = r.get("vulkan_vs_cpu_tps_ratio")
    speed = f"; decode x{_num(ratio, digits=3)} the CPU's" if ratio is not None else ""
    return [
        _row(
            "Vulkan",
            f"{r.get('vulkan_device') or 'no Vulkan module or device'}{speed}; build "
            f"{_num(r.get('build_seconds_with_vulkan'))} s with it, {_num(r.get('build_seconds_cpu_only'))} s "
            "CPU only (measured once)",
        )
    ]


def _variant_rows(r: dict[str, Any]) -> list[str]:
    vulkan = _vulkan_row(r) if "vulkan_device" in r else []
    if r.get("default_vs_portable_tps_ratio") is None:
        return [_row("CPU variant", str(r.get("cpu_variant", "?"))), *vulkan]
    return [
        *vulkan,
        _row(
            "CPU variant",
            f"{r['cpu_variant']} ({r.get('cpu_variant_how', '?')}; "
            f"{r.get('cpu_variants_built', '?')} built) against AVX2-only haswell: decode "
            f"x{_num(r['default_vs_portable_tps_ratio'], digits=3)} ({_num(r.get('portable_tg_tps'))} → "
            f"{_num(r.get('cpu_variant_tg_tps'))}), prompt "
            f"x{_num(r.get('default_vs_portable_pp_ratio'), digits=3)} "
            f"({_num(r.get('portable_pp_tps'))} → {_num(r.get('cpu_variant_pp_tps'))} tokens/s)",
        ),
    ]


def _decode_rows(r: dict[str, Any]) -> list[str]:
    if r.get("spec_lookup_speedup") is None:
        return _variant_rows(r)
    rows = [
        *_variant_rows(r),
        _row(
            "prompt lookup, code edit",
            f"x{_num(r['spec_lookup_speedup'], digits=3)} tokens/s "
            f"({_num(r['spec_lookup_plain_tps'])} → {_num(r['spec_lookup_tps'])}; acceptance "
            f"{_num(r['spec_lookup_acceptance_rate'], digits=3)}; "
            f"{'same output' if r['spec_lookup_outputs_match'] else 'outputs DIFFER'})",
        ),
        _row(
            "prompt lookup, story",
            f"x{_num(r['spec_chat_ratio'], digits=3)} tokens/s "
            f"(acceptance {_num(r.get('spec_chat_acceptance_rate'), digits=3)})",
        ),
    ]
    if r.get("spec_draft_speedup") is not None:
        rows.append(
            _row(
                "draft model",
                f"x{_num(r['spec_draft_speedup'], digits=3)} tokens/s with "
                f"{r['spec_draft_model']} (acceptance {_num(r['spec_draft_acceptance_rate'], digits=3)})",
            )
        )
    for kind in ("q8_0", "q4_0"):
        if r.get(f"kv_{kind}_vs_f16_tps_ratio") is not None:
            ratio, rss, f16 = r[f"kv_{kind}_vs_f16_tps_ratio"], r.get(f"kv_{kind}_rss_mb"), r.get("kv_f16_rss_mb")
            rows.append(
                _row(
                    f"KV cache {kind} / f16",
                    f"x{_num(ratio, digits=3)} tokens/s; {_num(rss, ' MB', 0)} vs "
                    f"{_num(f16, ' MB', 0)} resident at {r.get('kv_context', 4096):,} tokens",
                )
            )
    return rows


def _other_rows(r: dict[str, Any]) -> list[str]:
    return [
        _row("guardrail", f"{_num(r['filter_us_per_piece'], ' µs', 2)} per piece ({r['filter_bytes']:,}-byte stream)"),
        _row(
            "GUI worst stall",
            f"{_num(r['ui_max_stall_ms'], ' ms')}  (p99 {_num(r['ui_p99_stall_ms'], ' ms')}; "
            f"{r['ui_tokens']:,} tokens at {r['ui_tokens_per_s']:,}/s)",
        ),
        _row("GUI catch-up after last token", _num(r["ui_catchup_ms"], " ms")),
        _row(
            "GUI worst stall, one 1 MB piece",
            f"{_num(r.get('ui_huge_piece_max_stall_ms'), ' ms')}  "
            f"(on screen after {_num(r.get('ui_huge_piece_catchup_ms'), ' ms')})",
        ),
        _row("GUI worst stall, 1 MB line in an approval card", _num(r.get("ui_card_line_max_stall_ms"), " ms")),
        _row(
            "GUI worst stall, 1 MB line pasted",
            f"{_num(r.get('ui_paste_line_max_stall_ms'), ' ms')}  "
            f"(then sent: {_num(r.get('ui_send_line_max_stall_ms'), ' ms')})",
        ),
        _row("model load", f"{_num(r['load_ms'], ' ms', 0)}  (import llama_cpp {_num(r['import_ms'], ' ms', 0)})"),
        _row(
            "resident memory",
            f"{_num(r['rss_mb'], ' MB', 0)} after load, "
            f"{_num(r['rss_after_first_token_mb'], ' MB', 0)} after the first token",
        ),
        _row("history search", f"{_num(r['history_search_ms'], ' ms', 2)} over {r['history_messages']:,} messages"),
    ]


def _row(label: str, value: str) -> str:
    return f"{label:32}{value}"


def format_report(r: dict[str, Any]) -> str:
    lines = (
        _machine_lines(r)
        + _speed_rows(r)
        + _decode_rows(r)
        + _other_rows(r)
        + bench_long_chat.report_rows(r, _row)
        + bench_serve.report_rows(r, _row)
    )
    lines += bench_startup.report_rows(r, _row)
    lines += bench_docs.report_rows(r, _row)
    lines += bench_download.report_rows(r, _row)
    lines += [f"note: {n}" for n in r.get("notes", [])]
    return "\n".join(lines)


# -- the command ---------------------------------------------------------------------------


def say(message: str) -> None:
    """Progress as the run goes: one line on stderr per step."""
    sys.stderr.write(f"python -m tests.bench: {message}…\n")
    sys.stderr.flush()


def collect(args: argparse.Namespace) -> dict[str, Any]:
    report = run_engine_bench(config_from(args), say)
    n_ui = gui_tokens(args)
    if n_ui > 0:
        say(f"GUI under load: {n_ui:,} tokens at {UI_RATE:,} tokens/s (offscreen)")
    report.update(measure_gui(n_ui, UI_RATE, report["notes"]))
    report.update(bench_long_chat.collect(args, config_from(args), say, report["notes"]))
    report.update(bench_serve.collect(args, config_from(args), say, report["notes"]))
    report.update(_startup(args, say, report["notes"]))
    report.update(bench_docs.collect(args, config_from(args), say, report["notes"]))
    report.update(bench_download.collect(args, say, report["notes"]))
    say("an image through the fixture vision projector")
    config = config_from(args)
    report.update(measure_images(config.model_path(), min(config.runs, 5), report["notes"], config.threads))
    if not args.skip_decoding:
        say("predicted against measured decoding: the built-in model and Gemma 3 270M")
        report.update(bench_prediction.collect(config.thread_count(), say, report["notes"]))
    report["load_average_end"] = load_average()
    return report


def _startup(args: argparse.Namespace, say: Callable[[str], None], notes: list[str]) -> dict[str, Any]:
    """Start-up figures (`bench_startup`); nulls and a note when they cannot be taken."""
    out: dict[str, Any] = dict.fromkeys(bench_startup.FIELDS)
    runs = args.startup_runs if args.startup_runs is not None else (1 if args.quick else 3)
    if runs <= 0:
        return out
    say(f"start-up: ember --version, history list and the window, {runs} round(s), beside python -c pass")
    try:
        out.update(bench_startup.measure_startup(runs))
    except (BenchError, OSError, subprocess.TimeoutExpired) as exc:
        notes.append(f"start-up: {exc}")
    return out


def run(args: argparse.Namespace) -> int:
    try:
        report = collect(args)
    except (EngineError, FileNotFoundError, RuntimeError, subprocess.TimeoutExpired) as exc:
        sys.stderr.write(f"ember: bench failed: {exc}\n")
        return EXIT_FAILED
    if args.json:
        sys.stdout.write(json.dumps(report, ensure_ascii=False) + "\n")
    else:
        sys.stdout.write(format_report(report) + "\n")
    return EXIT_OK
