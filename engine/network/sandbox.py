"""Starting a program (an MCP server) without network access, where the platform allows it.

On Linux a child started through `unshare --net` (in a new user namespace, so no privileges
are needed) gets its own network namespace holding only a loopback interface that is down:
every connection it tries fails, whatever language it is written in. Kernels or containers
that forbid unprivileged user namespaces make the probe fail; elsewhere (macOS, Windows)
there is no such tool. There `isolation()` says so and the caller tells the user that
zero-egress is not enforced for the programs Ember starts.
"""

from __future__ import annotations

import functools
import shutil
import subprocess
import sys
from dataclasses import dataclass

PROBE_TIMEOUT_S = 5.0


@dataclass(frozen=True, slots=True)
class Isolation:
    available: bool
    prefix: tuple[str, ...] = ()  # the command line to put in front of the program's
    how: str = ""  # how it is done, or why it cannot be


@functools.cache
def isolation() -> Isolation:
    """Whether (and how) a child can be started without network access here; probed once."""
    if not sys.platform.startswith("linux"):
        return Isolation(False, how=f"not available on {sys.platform} (Linux network namespaces only)")
    unshare = shutil.which("unshare")
    if unshare is None:
        return Isolation(False, how="the unshare command (util-linux) is not installed")
    # -c keeps the user's own id inside the namespace (util-linux 2.38+); -r maps it to root.
    for flag in ("-cn", "-rn"):
        if _works([unshare, flag, "--", "true"]):
            return Isolation(True, (unshare, flag, "--"), f"a new network namespace (unshare {flag})")
    return Isolation(False, how="this kernel or container does not allow unprivileged network namespaces")


def _works(command: list[str]) -> bool:
    try:
        done = subprocess.run(command, capture_output=True, timeout=PROBE_TIMEOUT_S, check=False)
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0


def without_network(command: str, args: tuple[str, ...]) -> tuple[str, tuple[str, ...]] | None:
    """`command args` wrapped to run without network; None where that is not available."""
    iso = isolation()
    if not iso.available:
        return None
    return iso.prefix[0], (*iso.prefix[1:], command, *args)
