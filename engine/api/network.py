"""The zero-egress switch: its settings, its guard and ledger, and the report `ember doctor` prints."""

from __future__ import annotations

from engine.network.guard import Guard, active, enforced, guard_for
from engine.network.ledger import Attempt, shown
from engine.network.policy import NetworkSettings, check_entry, load_settings, save_settings, settings_file
from engine.network.report import network_report, report_lines

__all__ = [
    "Attempt",
    "Guard",
    "NetworkSettings",
    "active",
    "check_entry",
    "enforced",
    "guard_for",
    "load_settings",
    "network_report",
    "report_lines",
    "save_settings",
    "settings_file",
    "shown",
]
