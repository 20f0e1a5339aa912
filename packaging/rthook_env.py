"""PyInstaller runtime hook: keep the bundle's library path out of child processes (Linux).

The bootloader points LD_LIBRARY_PATH at the bundle's folder; the dynamic loader reads it once
at start, so the running app keeps finding its libraries after this. Programs Ember starts
(xdg-open and the browser behind a clicked link) get the user's own value back instead of the
bundle's libstdc++/OpenSSL. See PyInstaller's "Solving Linux library conflicts" notes.
"""

import os
import sys

if sys.platform.startswith("linux") and getattr(sys, "frozen", False):
    original = os.environ.pop("LD_LIBRARY_PATH_ORIG", None)
    if original is not None:
        os.environ["LD_LIBRARY_PATH"] = original
    else:
        os.environ.pop("LD_LIBRARY_PATH", None)
