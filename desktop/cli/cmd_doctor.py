"""`ember doctor`: what this machine's llama.cpp can run on, in a few lines.

Prints the llama-cpp-python version, llama.cpp's backends and devices (with free memory),
and whether models can be offloaded to a GPU, so a user can tell at a glance whether a
GPU build is installed and sees the card. `--json` prints the same as one object. No Qt
here: the window check reads Qt's plugin files without importing Qt.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any

from engine.api.program import ember_paths
from engine.api.text import strict_dumps

Check = Callable[[], dict[str, Any]]
EXIT_OK = 0


def register(sub: Any) -> None:
    p = sub.add_parser("doctor", help="show llama.cpp's build, backends and devices, and whether the GPU is used")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument(
        "--network",
        action="store_true",
        help="only zero-egress mode: what may connect, how it is enforced, the network ledger",
    )
    p.set_defaults(func=run)


def llama_report() -> dict[str, Any]:
    """llama.cpp's build: version, backends, devices, GPU offload, CPU features."""
    import llama_cpp

    from engine.api import machine

    devices = machine.devices()
    system_info = machine.system_info()
    return {
        "llama_cpp_python": str(getattr(llama_cpp, "__version__", "?")),
        "backends": machine.backend_names(),
        "devices": [
            {
                "name": d.name,
                "description": d.description,
                "type": d.kind,
                "free_bytes": d.free_bytes,
                "total_bytes": d.total_bytes,
            }
            for d in devices
        ],
        "gpu_offload": machine.devices_offload(),
        "gpu": gpu_report(),
        "system_info": system_info,
        "cpu": cpu_report(system_info),
    }


def gpu_report() -> dict[str, Any]:
    """The GPU modules' devices (software ones too), the one chosen and why (#35)."""
    from engine.api.machine import gpu_facts

    return gpu_facts()


def cpu_report(system_info: str) -> dict[str, Any]:
    """The CPU variant in use, what the CPU has unused, and the probe's verdict (#24)."""
    from engine.api.machine import cpu_facts

    return cpu_facts(system_info)


def window_report() -> dict[str, Any]:
    """Whether a window can open here (Qt's platform plugin and the libraries it needs)."""
    from desktop.core.platform_check import doctor_line  # reads files only: no Qt is imported

    ok, line = doctor_line()
    return {"ok": ok, "line": line}


def network_summary() -> dict[str, Any]:
    """Zero-egress mode in one line (`ember doctor --network` has the whole report)."""
    from engine.api.network import network_report

    report = network_report(ember_paths(), limit=0)
    allowed = len(report["allowed"])
    mode = f"on, {allowed} destination(s) allowed" if report["zero_egress"] else "OFF"
    totals = report["totals"]
    return {
        "zero_egress": report["zero_egress"],
        "allowed": allowed,
        "totals": totals,
        "line": f"zero-egress mode: {mode}; ledger: {totals['allowed']} allowed, {totals['refused']} refused "
        "(ember doctor --network)",
    }


CHECKS: list[tuple[str, Check]] = [("llama", llama_report), ("network", network_summary), ("window", window_report)]


def _gib(n: int) -> str:
    return f"{n / (1 << 30):.1f} GiB"


def _device_line(d: dict[str, Any]) -> str:
    memory = f", {_gib(d['free_bytes'])} free of {_gib(d['total_bytes'])}" if d["total_bytes"] else ""
    return f"  {d['name']}: {d['description']} ({d['type']}{memory})"


def gpu_verdict(r: dict[str, Any]) -> str:
    """The one line that answers "is the GPU used?"."""
    gpus = [d for d in r["devices"] if d["type"] in ("GPU", "iGPU")]
    if r["gpu_offload"] and gpus:
        names = ", ".join(sorted({d["description"] or d["name"] for d in gpus}))
        return f"GPU offload: yes — models load with as many layers as fit on {names}"
    from engine.api.machine import gpu_backend_names

    if gpu_backend_names(r["backends"]):
        return "GPU offload: no — this build has GPU support but found no usable GPU"
    if r.get("gpu", {}).get("devices"):  # a GPU module whose devices are listed, none chosen (#35)
        return "GPU offload: no — none of the GPU modules' devices was chosen (see below)"
    return "GPU offload: no — this llama.cpp build is CPU-only (see the README to rebuild it for your GPU)"


def format_llama(r: dict[str, Any]) -> list[str]:
    lines = [
        f"llama-cpp-python {r['llama_cpp_python']}; llama.cpp backends: {', '.join(r['backends']) or 'unknown'}",
        "devices:" if r["devices"] else "devices: none reported (the ggml device API was not found)",
        *(_device_line(d) for d in r["devices"]),
        gpu_verdict(r),
        r["gpu"]["line"],
        *r["gpu"]["device_lines"],
        *([r["gpu"]["note"]] if r["gpu"]["note"] else []),
    ]
    if r["system_info"]:
        lines.append(f"build features: {r['system_info'].rstrip(' |')}")
    lines += [
        r["cpu"]["line"],
        f"CPU probe (llama.cpp decoding in a child process, cached per machine): {r['cpu']['probe']}",
    ]
    return lines


def run(args: argparse.Namespace) -> int:
    if args.network:
        return _network(args.json)
    report = {name: check() for name, check in CHECKS}
    if args.json:
        sys.stdout.write(strict_dumps(report, ensure_ascii=False) + "\n")
        return EXIT_OK
    lines = format_llama(report["llama"])
    lines.extend(str(value.get("line", value)) for name, value in report.items() if name != "llama")
    sys.stdout.write("\n".join(lines) + "\n")
    return EXIT_OK


def _network(as_json: bool) -> int:
    from engine.api.network import network_report, report_lines

    report = network_report(ember_paths())
    if as_json:
        sys.stdout.write(strict_dumps(report, ensure_ascii=False) + "\n")
    else:
        sys.stdout.write("\n".join(report_lines(report)) + "\n")
    return EXIT_OK
