"""A reply's receipt (engine/backends/receipt.py) as short lines, for the message's details."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast


def _short(sha: object) -> str:
    return f"{sha[:16]}…" if isinstance(sha, str) else "not recorded"


def receipt_lines(receipt: Mapping[str, Any] | None) -> list[str]:
    """`Model: NAME`, `Model SHA-256: …`, `Sampling: …`, `Seed: N`, … ([] when there is none)."""
    if not receipt:
        return []
    model = cast(dict[str, Any], receipt.get("model") or {})
    sampling = cast(dict[str, Any], receipt.get("sampling") or {})
    greedy = float(sampling.get("temperature", 1.0)) <= 0.0
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
    reply = cast(dict[str, Any], receipt.get("reply") or {})
    if reply:
        lines.append(f"Reply: {reply.get('tokens', 0)} tokens, SHA-256 {_short(reply.get('sha256'))}")
    if receipt.get("device"):
        lines.append(f"Ran on: {receipt['device']}")
    return lines
