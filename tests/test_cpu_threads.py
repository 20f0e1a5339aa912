"""The default decode threads: physical cores this process may use, less one for the window."""

from __future__ import annotations

from engine.llama.cpu_threads import default_threads, physical_cores


def _cpuinfo(pairs: list[tuple[int, int]]) -> str:
    return (
        "\n\n".join(
            f"processor\t: {i}\nphysical id\t: {p}\ncore id\t\t: {c}\nflags\t\t: avx2" for i, (p, c) in enumerate(pairs)
        )
        + "\n"
    )


def test_hyper_threads_are_not_counted_and_one_core_is_left_for_the_window() -> None:
    four_cores_ht = _cpuinfo([(0, c) for c in range(4)] * 2)  # 8 logical CPUs
    assert physical_cores(four_cores_ht) == 4
    assert default_threads(four_cores_ht, cpus=8) == 3
    two_sockets = _cpuinfo([(0, 0), (0, 1), (1, 0), (1, 1)])  # the same core id on each socket
    assert physical_cores(two_sockets) == 4


def test_small_and_restricted_machines_still_get_a_thread() -> None:
    assert default_threads(_cpuinfo([(0, 0), (0, 1)]), cpus=2) == 1  # this VM: 2 cores
    assert default_threads(_cpuinfo([(0, 0)]), cpus=1) == 1
    assert default_threads(_cpuinfo([(0, c) for c in range(16)]), cpus=4) == 3  # taskset to 4 CPUs


def test_without_core_ids_the_usable_cpus_count() -> None:
    arm = "processor\t: 0\nBogoMIPS\t: 50\n\nprocessor\t: 1\nBogoMIPS\t: 50\n"
    assert physical_cores(arm) is None
    assert default_threads(arm, cpus=8) == 7
