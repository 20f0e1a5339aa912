"""Starting a program (an MCP server) without network access, where the platform allows it.

On Linux a child started through `unshare --net` (in a new user namespace, so no privileges
are needed) gets its own network namespace holding only a loopback interface that is down:
every connection it tries fails, whatever language it is written in, and abstract Unix
sockets (which belong to the network namespace) are out of reach too. Unix sockets that are
files are not: the system D-Bus leads to systemd-resolved (a DNS query on request), and any
relay on the file system forwards whatever it is sent. So where the kernel allows it the
child also gets a mount namespace (`unshare -m`) in which `launch` mounts an empty tmpfs
over `/run` (and `/var/run` where it is a folder of its own), unsets the D-Bus addresses and
`XDG_RUNTIME_DIR`, and drops every capability for good (bounding set, ambient set, securebits)
before it starts the program, so the program cannot unmount what hides the sockets.

Kernels or containers that forbid unprivileged user namespaces make the probe fail; elsewhere
(macOS, Windows) there is no such tool. There `isolation()` says so and the caller tells the
user that zero-egress is not enforced for the programs Ember starts.
"""

from __future__ import annotations

import functools
import shutil
import subprocess
import sys
from dataclasses import dataclass

from engine.child_env import function_child

PROBE_TIMEOUT_S = 5.0
HIDDEN = ("/run", "/var/run")  # where a system's service sockets live (D-Bus, resolved, docker, the user's)
SCRUBBED = ("DBUS_SESSION_BUS_ADDRESS", "DBUS_SYSTEM_BUS_ADDRESS", "XDG_RUNTIME_DIR")  # addresses of sockets
STILL_REACHABLE = "Unix sockets outside /run and /var/run (in /tmp or the home folder) stay reachable"


@dataclass(frozen=True, slots=True)
class Isolation:
    available: bool
    prefix: tuple[str, ...] = ()  # the command line to put in front of the program's
    how: str = ""  # how it is done, or why it cannot be
    hides_sockets: bool = False  # whether /run's sockets are hidden too (a mount namespace)

    @property
    def reachable(self) -> str:
        """What an isolated program can still reach, in words (for `ember doctor --network`)."""
        if not self.available:
            return "everything"
        if self.hides_sockets:
            return STILL_REACHABLE
        return "every Unix socket on the file system (the system D-Bus and systemd-resolved can make DNS queries)"


@functools.cache
def isolation() -> Isolation:
    """Whether (and how) a child can be started without network access here; probed once."""
    if not sys.platform.startswith("linux"):
        return Isolation(False, how=f"not available on {sys.platform} (Linux network namespaces only)")
    unshare = shutil.which("unshare")
    if unshare is None:
        return Isolation(False, how="the unshare command (util-linux) is not installed")
    launcher = tuple(function_child("engine.network.sandbox:launch").argv)
    # -c keeps the user's own id inside the namespace (util-linux 2.38+) and --keep-caps lets the
    # launcher mount before it drops everything; -r maps the user to root instead.
    for flags in (("-cnm", "--keep-caps"), ("-rnm",)):
        prefix = (unshare, *flags, "--", *launcher, ",".join(SCRUBBED))
        if _works([*prefix, "true"]):
            return Isolation(
                True,
                prefix,
                f"new network and mount namespaces (unshare {' '.join(flags)}), with /run's sockets hidden",
                hides_sockets=True,
            )
    # Without a mount namespace the sockets stay in view; at least the addresses that name them go.
    scrub = ("env", *(f"--unset={name}" for name in SCRUBBED))
    for flag in ("-cn", "-rn"):
        if _works([unshare, flag, "--", *scrub, "true"]):
            return Isolation(True, (unshare, flag, "--", *scrub), f"a new network namespace (unshare {flag})")
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


def launch() -> int:
    """Runs inside the new namespaces (started by `isolation()`'s prefix): unsets the variables
    named in argv[1] (comma-separated), hides /run's sockets, drops every capability, then
    becomes the program (argv[2:])."""
    import ctypes
    import os

    libc = ctypes.CDLL(None, use_errno=True)
    program = shutil.which(sys.argv[2]) or sys.argv[2]
    program = os.path.realpath(program)  # found before /run is hidden (NixOS keeps its PATH under /run)
    for folder in HIDDEN:
        if os.path.isdir(folder) and not os.path.islink(folder):
            if libc.mount(b"tmpfs", folder.encode(), b"tmpfs", 2 | 4 | 8, b"size=1m,mode=755") != 0:
                sys.exit(f"ember: cannot hide the sockets in {folder} ({os.strerror(ctypes.get_errno())})")
            os.mkdir(folder + "/lock")  # what programs expect of /run that holds no socket
            os.chmod(folder + "/lock", 0o1777)
            if os.path.isdir("/dev/shm"):
                os.symlink("/dev/shm", folder + "/shm")
    for name in sys.argv[1].split(","):
        os.environ.pop(name, None)
    # No capability survives the exec, not even for uid 0 in the namespace: SECBIT_NOROOT (+ locked),
    # no ambient capabilities, an empty bounding set, and no way to gain privileges back.
    ok = libc.prctl(28, 3, 0, 0, 0) == 0 and libc.prctl(47, 4, 0, 0, 0) == 0
    for cap in range(64):
        if libc.prctl(24, cap, 0, 0, 0) != 0 and ctypes.get_errno() != 22:  # EINVAL: no such capability
            ok = False
    if not ok or libc.prctl(38, 1, 0, 0, 0) != 0:
        sys.exit(f"ember: cannot drop the sandbox's capabilities ({os.strerror(ctypes.get_errno())})")
    os.execv(program, sys.argv[2:])
    return 127  # not reached: execv replaced this process
