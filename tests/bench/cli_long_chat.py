"""The long-conversation part of `ember bench` (no Qt in this process).

- long chat (in-process, `tests.bench.long_chat`): time to first token at turn 5 and at
  turn 100 of one conversation on the benchmarked model at a 2,048-token context, the
  template renders per turn, and with `--llama-bench` native llama.cpp reading the same new
  tokens at the same KV depth right after each of the two turns;
- the window at scale (an offscreen child, `tests.tools.scale_bench`): opening a
  2,000-message conversation, streaming into it, a sidebar of 5,000 conversations.
"""

from __future__ import annotations

import argparse
import json
import subprocess
from collections.abc import Callable
from typing import Any

from engine.child_env import python_child
from engine.errors import BenchError
from engine.llama.llama import LlamaBackend
from engine.llama.offload import ALL_LAYERS
from tests.bench.long_chat import NativeTtft, measure_long_chat
from tests.bench.native import NativePrompt
from tests.bench.suite import BenchConfig

LONG_CHAT_TURNS, LONG_CHAT_TURNS_QUICK, LONG_CHAT_CTX = 100, 30, 2048
SCALE_MESSAGES, SCALE_CONVERSATIONS = 2000, 5000
SCALE_FIELDS = (
    "gui_open_2000_ms",
    "gui_open_2000_all_ms",
    "gui_stream_2000_max_stall_ms",
    "gui_stream_2000_p99_stall_ms",
    "sidebar_5000_fill_ms",
    "sidebar_5000_search_ms",
    "sidebar_5000_scroll_max_ms",
)


def collect(
    args: argparse.Namespace, config: BenchConfig, say: Callable[[str], None], notes: list[str]
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    turns = (
        args.long_chat_turns
        if args.long_chat_turns is not None
        else (LONG_CHAT_TURNS_QUICK if args.quick else LONG_CHAT_TURNS)
    )
    if turns > 0:
        say(f"long chat: {turns} turns at a {LONG_CHAT_CTX:,}-token context")
        out.update(
            measure_long_chat(
                config.model_path(),
                n_ctx=LONG_CHAT_CTX,
                turns=turns,
                threads=config.threads,
                early_turn=min(5, turns),
                native=_native(config),
            )
        )
    messages = args.scale_messages if args.scale_messages is not None else SCALE_MESSAGES
    if messages > 0:
        say(f"the window at scale: {messages:,} messages, {SCALE_CONVERSATIONS:,} conversations (offscreen)")
        try:
            conversations = SCALE_CONVERSATIONS if messages >= SCALE_MESSAGES else max(50, messages)  # a tiny run
            out.update(_scale_child(messages, conversations, compare_eager=not args.quick))
        except (BenchError, subprocess.TimeoutExpired, ValueError) as exc:
            notes.append(f"window at scale: {exc}")
    return out


def _native(config: BenchConfig) -> Callable[[LlamaBackend], NativeTtft] | None:
    """llama-bench on the long chat's model, threads, layers and flash attention (`--llama-bench`)."""
    binary = config.llama_bench
    if binary is None:
        return None

    def for_backend(backend: LlamaBackend) -> NativeTtft:
        layers = ALL_LAYERS if backend.placement.n_gpu_layers == ALL_LAYERS else backend.n_gpu_layers
        return NativePrompt(
            binary, config.model_path(), config.thread_count(), flash_attn=backend.flash_attn_mode, n_gpu_layers=layers
        )

    return for_backend


def _scale_child(messages: int, conversations: int, compare_eager: bool) -> dict[str, Any]:
    code = (
        "import json\nfrom tests.tools.scale_bench import measure_scale\n"
        f"print(json.dumps(measure_scale(messages={messages}, conversations={conversations}, "
        f"compare_eager={compare_eager})))\n"
    )
    child = python_child(code, QT_QPA_PLATFORM="offscreen")
    done = subprocess.run(
        child.argv, capture_output=True, text=True, check=False, env=child.env, cwd=child.cwd, timeout=900
    )
    if done.returncode != 0:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise BenchError(f"the scale child failed ({done.returncode}): {tail}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def report_rows(r: dict[str, Any], row: Callable[[str, str], str]) -> list[str]:
    lines: list[str] = []
    if r.get("long_chat_turns"):
        lines.append(
            row(
                "long chat TTFT",
                f"turn 5 {r['long_chat_ttft_turn5_ms']} ms, turn {r['long_chat_turns']} "
                f"{r['long_chat_ttft_last_turn_ms']} ms (x{r['long_chat_ttft_ratio']}; last 10 median "
                f"{r['long_chat_ttft_last10_median_ms']} ms) at {r['long_chat_ctx']:,} tokens",
            )
        )
        if r.get("long_chat_evaluated_on_moves_max") is not None:
            lines.append(
                row(
                    "window moves",
                    f"{r['long_chat_window_moves']}, at most {r['long_chat_evaluated_on_moves_max']} tokens "
                    f"evaluated on one ({r['long_chat_shifted_tokens']:,} kept by shifting the KV cache)",
                )
            )
        lines.append(
            row(
                "prompt renders",
                f"{r['long_chat_prompt_renders_per_turn']} per turn (at most {r['long_chat_prompt_renders_max']})",
            )
        )
    if r.get("long_chat_ttft_vs_native") is not None:
        lines.append(
            row(
                "long chat vs native",
                f"turn 5 x{r['long_chat_ttft_vs_native_turn5']} "
                f"({r['long_chat_native_ttft_turn5_ms']} ms native at depth {r['long_chat_depth_turn5']}), "
                f"turn {r['long_chat_turns']} x{r['long_chat_ttft_vs_native']} "
                f"({r['long_chat_native_ttft_last_turn_ms']} ms at depth {r['long_chat_depth_last_turn']})",
            )
        )
    if r.get("gui_open_2000_ms") is not None:
        eager = r.get("gui_open_2000_all_ms")
        lines.append(
            row(
                "open 2,000 messages",
                f"{r['gui_open_2000_ms']} ms to first paint"
                + (f" (all widgets at once: {eager} ms)" if eager is not None else ""),
            )
        )
        lines.append(
            row(
                "stream into it",
                f"worst stall {r['gui_stream_2000_max_stall_ms']} ms (p99 {r['gui_stream_2000_p99_stall_ms']} ms)",
            )
        )
        lines.append(
            row(
                "sidebar, 5,000 conversations",
                f"list {r['sidebar_5000_fill_ms']} ms, search "
                f"{r['sidebar_5000_search_ms']} ms, worst scroll step {r['sidebar_5000_scroll_max_ms']} ms",
            )
        )
    return lines
