"""A reply's receipt (engine/backends/receipt.py) and timing as short lines, for the message's details."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from engine.api.text import is_int, is_number


def _short(sha: object) -> str:
    return f"{sha[:16]}…" if isinstance(sha, str) else "not recorded"


def receipt_lines(receipt: Mapping[str, Any] | None) -> list[str]:
    """`Model: NAME`, `Model SHA-256: …`, `Sampling: …`, `Seed: N`, … ([] when there is none)."""
    if not receipt:
        return []
    model, sampling = _part(receipt, "model"), _part(receipt, "sampling")  # an import may hold anything
    temperature = sampling.get("temperature", 1.0)
    greedy = is_number(temperature) and temperature <= 0.0
    lines = [f"Backend: {receipt.get('backend', '?')}" + (f" on {receipt['server']}" if receipt.get("server") else "")]
    if model.get("file"):
        lines += [f"Model file: {model['file']}", f"Model SHA-256: {_short(model.get('sha256'))}"]
        if model.get("source"):
            lines.append(f"Model source: {model['source']}")
    elif model.get("name"):
        lines.append(f"Model: {model['name']}")
    if receipt.get("chat_template_sha256"):
        lines.append(f"Chat template SHA-256: {_short(receipt['chat_template_sha256'])}")
    settings = ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in sampling.items())
    lines.append(f"Sampling: {'greedy; ' if greedy else ''}{settings}")
    lines.append(f"Seed: {receipt.get('seed') if receipt.get('seed') is not None else 'server default'}")
    reply = _part(receipt, "reply")
    if reply:
        lines.append(f"Reply: {reply.get('tokens', 0)} tokens, SHA-256 {_short(reply.get('sha256'))}")
    if receipt.get("device"):
        lines.append(f"Ran on: {receipt['device']}")
    cache = _part(receipt, "kv_cache")
    if is_int(warm := cache.get("warm_tokens")):
        lines.append(
            f"KV cache: {f'warm ({warm} prompt tokens reused)' if warm else 'cold'}"
            + (f", {cache['type']}" if isinstance(cache.get("type"), str) else "")
        )
    return lines


def _part(receipt: Mapping[str, Any], key: str) -> dict[str, Any]:
    value = receipt.get(key)
    return cast(dict[str, Any], value) if isinstance(value, dict) else {}


def timing_lines(stats: Mapping[str, Any] | None) -> list[str]:
    """`First token after 420 ms`, `Speed: 18.3 tokens/s` from a reply's stats ([] when not measured)."""
    if not stats:
        return []
    lines: list[str] = []
    ttft, speed = stats.get("ttft_ms"), stats.get("tokens_per_s")
    if is_number(ttft) and ttft > 0:
        lines.append(f"First token after {ttft:.0f} ms" if ttft < 1000 else f"First token after {ttft / 1000:.1f} s")
    if is_number(speed) and speed > 0:
        lines.append(f"Speed: {speed:.1f} tokens/s")
    return lines
