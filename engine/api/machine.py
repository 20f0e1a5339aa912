"""The machine, for the front ends: its cores and its measured speed (the profile that every
model's predicted speed is read from, `models.library.speed`)."""

from __future__ import annotations

from engine.backends.cpu_threads import default_threads
from engine.backends.machine_profile import cached, measure, measured_decode

__all__ = ["cached", "default_threads", "measure", "measured_decode"]
