"""What zero-egress mode is doing, as plain values and lines: `ember doctor --network`, the window."""

from __future__ import annotations

from typing import Any

from engine.network.ledger import LEDGER_FILE, Attempt, read_ledger_file
from engine.network.policy import EgressPolicy, settings_file
from engine.network.sandbox import isolation
from models.library.paths import EmberPaths

LEDGER_LINES = 20


def network_report(paths: EmberPaths, limit: int = LEDGER_LINES) -> dict[str, Any]:
    view = EgressPolicy(paths).view()
    iso = isolation()
    entries = read_ledger_file(paths.data_dir / LEDGER_FILE)
    return {
        "zero_egress": view.zero_egress,
        "settings_file": str(settings_file(paths)),
        "allowed": [{"destination": str(a.destination), "source": a.source} for a in view.allowed],
        "mcp_with_network": sorted(view.mcp_network),
        "enforcement": {
            "in_process": "a Python audit hook refuses socket connections and name lookups before they happen",
            "child_processes": {"enforced": iso.available, "how": iso.how, "still_reachable": iso.reachable},
        },
        "ledger_file": str(paths.data_dir / LEDGER_FILE),
        "totals": {"allowed": sum(e.allowed for e in entries), "refused": sum(not e.allowed for e in entries)},
        "ledger": [e.to_json() for e in entries[-limit:]],
    }


def report_lines(report: dict[str, Any]) -> list[str]:
    allowed: list[dict[str, str]] = report["allowed"]
    child = report["enforcement"]["child_processes"]
    totals = report["totals"]
    if report["zero_egress"]:
        lines = ["Zero-egress mode: on — Ember connects only to the destinations allowed below"]
    else:
        lines = ["Zero-egress mode: OFF — Ember may connect anywhere (turn it on: ember network on)"]
    lines.append("allowed: " + (", ".join(f"{a['destination']} ({a['source']})" for a in allowed) or "nothing"))
    if report["mcp_with_network"]:
        lines.append("MCP servers started with network: " + ", ".join(report["mcp_with_network"]))
    lines.append(f"in this process: {report['enforcement']['in_process']}")
    if child["enforced"]:
        lines.append(f"MCP servers Ember starts: without network access, in {child['how']}")
        lines.append(f"  still reachable from them: {child['still_reachable']}")
    else:
        lines.append(f"MCP servers Ember starts: NOT enforced — {child['how']}")
    shown: list[dict[str, Any]] = report["ledger"]
    lines.append(
        f"ledger ({report['ledger_file']}): {totals['allowed']} allowed, {totals['refused']} refused"
        + (f"; the last {len(shown)}:" if shown else "")
    )
    lines.extend("  " + a.line() for e in shown if (a := Attempt.from_json(e)) is not None)
    return lines
