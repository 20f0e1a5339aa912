"""`ember network`: zero-egress mode's setting, allowed destinations and ledger.

ember network                      # the report (same as `ember doctor --network`)
ember network allow HOST[:PORT]    # allow a destination (or a URL, or mcp:NAME)
ember network remove HOST[:PORT]   # take it off the list again
ember network on | off             # zero-egress mode (on for a fresh install)
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from desktop.cli.common import EXIT_OK, fail
from engine.api.errors import ConfigError
from engine.api.network import (
    NetworkSettings,
    check_entry,
    load_settings,
    network_report,
    report_lines,
    save_settings,
    settings_file,
)
from engine.api.program import ember_paths
from engine.api.text import strict_dumps

ACTIONS = ("allow", "remove", "on", "off")


def register(sub: Any) -> None:
    p = sub.add_parser("network", help="zero-egress mode: show it, allow a destination, turn it on or off")
    p.add_argument("action", nargs="?", choices=ACTIONS, help="allow | remove DESTINATION, or on | off")
    p.add_argument("destination", nargs="?", help="host, host:port, a server URL, or mcp:NAME")
    p.add_argument("--json", action="store_true", help="print the report as one JSON object")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    paths = ember_paths()
    if args.action is None:
        report = network_report(paths)
        text = strict_dumps(report, ensure_ascii=False) if args.json else "\n".join(report_lines(report))
        sys.stdout.write(text + "\n")
        return EXIT_OK
    settings = load_settings(paths)
    try:
        changed, said = _change(settings, args.action, args.destination)
    except ConfigError as exc:
        return fail(str(exc))
    save_settings(paths, changed)
    sys.stdout.write(f"{said} ({settings_file(paths)})\n")
    return EXIT_OK


def _change(settings: NetworkSettings, action: str, destination: str | None) -> tuple[NetworkSettings, str]:
    if action in ("on", "off"):
        if destination:
            raise ConfigError(f"`ember network {action}` takes no destination")
        on = action == "on"
        return NetworkSettings(on, settings.allow), f"zero-egress mode is {'on' if on else 'OFF'}"
    if not destination:
        raise ConfigError(f"name the destination: ember network {action} HOST[:PORT]")
    entry = check_entry(destination)
    if action == "allow":
        allow = settings.allow if entry in settings.allow else (*settings.allow, entry)
        return NetworkSettings(settings.zero_egress, allow), f"allowed {entry}"
    if entry not in settings.allow:
        raise ConfigError(f"{entry} is not on the allowed list (saved servers are removed in the window)")
    return NetworkSettings(settings.zero_egress, tuple(a for a in settings.allow if a != entry)), f"removed {entry}"
