"""`ember doctor`: llama.cpp's build, backends and devices, and one line on the GPU."""

from __future__ import annotations

import json
from typing import Any

import pytest

from desktop.cli.cmd_doctor import gpu_verdict
from desktop.cli.main import main

H200 = {"name": "CUDA0", "description": "NVIDIA H200", "type": "GPU", "free_bytes": 140 << 30, "total_bytes": 141 << 30}
CPU = {"name": "CPU", "description": "Xeon", "type": "CPU", "free_bytes": 8 << 30, "total_bytes": 16 << 30}


def _report(backends: list[str], devices: list[dict[str, Any]], offload: bool) -> dict[str, Any]:
    return {
        "llama_cpp_python": "0.3.36",
        "backends": backends,
        "devices": devices,
        "gpu_offload": offload,
        "system_info": "",
    }


def test_doctor_prints_backends_devices_and_the_gpu_verdict(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["doctor"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("llama-cpp-python ") and "backends: " in out
    assert "  CPU: " in out  # every build has the CPU device
    assert sum(line.startswith("GPU offload: ") for line in out.splitlines()) == 1
    assert sum(line.startswith("GPU: ") for line in out.splitlines()) == 1  # the pick (#35)
    # #24: the CPU variant in use and the probe's verdict (this machine runs the build).
    assert sum(line.startswith("CPU variant: ") for line in out.splitlines()) == 1
    assert any(line.startswith("CPU probe ") and line.endswith(": passed") for line in out.splitlines())


def test_doctor_json_has_the_same_facts(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["doctor", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)["llama"]
    assert "CPU" in report["backends"] and isinstance(report["gpu_offload"], bool)
    assert any(d["type"] == "CPU" and d["total_bytes"] > 0 for d in report["devices"])
    assert report["cpu"]["probe"] == "passed" and report["cpu"]["line"].startswith("CPU variant: ")
    # #35: the GPU pick in one line (on a CPU-only build: how to add the Vulkan module), its devices
    gpu = report["gpu"]
    assert gpu["line"].startswith("GPU: ") and "\n" not in gpu["line"]
    assert isinstance(gpu["devices"], list) and (gpu["chosen"] is None or gpu["chosen"] in gpu["devices"])


def test_the_verdict_names_the_gpu_or_says_why_not() -> None:
    assert gpu_verdict(_report(["CUDA", "CPU"], [H200, CPU], True)).startswith("GPU offload: yes")
    assert "NVIDIA H200" in gpu_verdict(_report(["CUDA", "CPU"], [H200, CPU], True))
    assert "found no usable GPU" in gpu_verdict(_report(["CUDA", "CPU"], [CPU], False))
    assert "CPU-only" in gpu_verdict(_report(["CPU"], [CPU], False))


def test_doctor_names_a_missing_qt_library_in_one_line(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from desktop.core import platform_check

    monkeypatch.setattr(
        platform_check,
        "doctor_line",
        lambda env=None: (False, "the window can't open: Qt's xcb plugin needs libxcb-icccm.so.4"),
    )
    assert main(["doctor"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[-1] == "the window can't open: Qt's xcb plugin needs libxcb-icccm.so.4"


def test_a_gpu_module_with_only_a_software_device_is_not_called_cpu_only() -> None:
    report = _report(["CPU"], [CPU], False)
    report["gpu"] = {"devices": [{"backend": "Vulkan", "name": "llvmpipe", "kind": "software"}]}
    assert gpu_verdict(report) == "GPU offload: no — none of the GPU modules' devices was chosen (see below)"
    assert "CPU-only" in gpu_verdict(_report(["CPU"], [CPU], False))
