"""A guard against a PySide6 reference-count bug that crashes long sessions on Python 3.11.

PySide6 6.12.0 on CPython 3.11 drops one reference to `None` on every void Qt call
(`setText`, `postEvent`, `QTimer.start`…) and one to `True` on every `Signal.emit`. Python
3.12+ makes those objects immortal, so the bug is invisible there; on 3.11 the count reaches
zero after a few thousand calls and the process aborts ("bool_dealloc: deallocating True or
False", "none_dealloc"). A streamed reply of ~1,000 tokens was enough. PySide6 6.11.3 is
not affected.

`guard_singleton_refcounts()` measures whether this PySide build drains the counts and, only
if it does, lifts the counts of `None`, `True` and `False` far out of reach — what Python
3.12 does for every build. It is a no-op on a correct build and on Python 3.12+. The real fix
is a PySide6 pin that excludes the broken release; this keeps the app alive meanwhile.
"""

from __future__ import annotations

import ctypes
import logging
import sys

log = logging.getLogger("desktop.qt_compat")

_PROBE_CALLS = 64
_LIFT = 1 << 40  # a drain of a million calls a second would need ~13 days to use this up
_checked = False
_guarded = False


def _probe_drain() -> bool:
    """True when void Qt calls or signal emits lose references to the singletons."""
    from PySide6.QtCore import QObject, Signal

    class _Probe(QObject):
        ping = Signal()

    probe = _Probe()
    probe.ping.connect(lambda: None)
    before = (sys.getrefcount(None), sys.getrefcount(True))
    for _ in range(_PROBE_CALLS):
        probe.setObjectName("probe")
        probe.ping.emit()
    after = (sys.getrefcount(None), sys.getrefcount(True))
    # Other threads may move the counts a little; a real drain loses one per call.
    return any(b - a >= _PROBE_CALLS // 2 for a, b in zip(after, before, strict=True))


def _lift(obj: object) -> None:
    # CPython keeps ob_refcnt as the first Py_ssize_t of every object.
    ctypes.c_ssize_t.from_address(id(obj)).value += _LIFT


def guard_singleton_refcounts() -> bool:
    """Apply the guard if this interpreter and PySide build need it; True if applied."""
    global _checked, _guarded
    if _checked:
        return _guarded
    _checked = True
    if sys.version_info >= (3, 12) or sys.implementation.name != "cpython" or not _probe_drain():
        return False
    for obj in (None, True, False):
        _lift(obj)
    _guarded = True
    import PySide6

    log.warning("PySide6 %s leaks references to None/True on Python %d.%d; guard applied",
                PySide6.__version__, *sys.version_info[:2])
    return True

