"""The run's report of whether the emulation was short of CPU (``commsched.testbed.cpu``).

The machine is made short on purpose: one busy loop per core and one more (processes of this test,
ended by their ids in ``finally``) while the sampler runs; the window is then short, its cores busy
for at least :data:`SHORT` of the wall clock. The reference for the cores is ``os.cpu_count()``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from commsched.testbed.cpu import SHORT, CpuSampler, cpu_report


@pytest.mark.skipif(not os.path.exists("/proc/stat"), reason="needs /proc/stat (Linux)")
def test_a_window_the_machine_spends_busy_is_reported_short() -> None:
    burners: list[subprocess.Popen[bytes]] = []
    sampler = CpuSampler(interval_s=0.2)
    try:
        sampler.start()
        for _ in range((os.cpu_count() or 1) + 1):
            burners.append(subprocess.Popen([sys.executable, "-c", "while True: pass"]))
        time.sleep(0.5)  # the burners take the cores
        begin = time.time()
        time.sleep(1.5)
        end = time.time()
    finally:
        for p in burners:
            p.kill()
            p.wait(timeout=10)
        sampler.stop()
    report = cpu_report(sampler.samples, start=begin, end=end)
    assert report["short"] is True, report
    assert report["busy_share"] >= SHORT
    assert report["cores"] == pytest.approx(os.cpu_count(), rel=0.25)
    assert report["wall_s"] == pytest.approx(end - begin, abs=0.5)


def test_a_window_without_samples_says_nothing() -> None:
    assert cpu_report([], start=0.0, end=1.0)["short"] is None
