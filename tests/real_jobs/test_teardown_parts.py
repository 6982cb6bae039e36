"""The parts of "nothing left behind" that need no root: stopping processes by PID and start time
(never a reused PID), and the script that removes a forgotten job's counters and pins."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from commsched.runtime.enforce.marking import nft
from commsched.runtime.enforce.processes.cgroups import process_start, stop_processes

# a process that ignores SIGTERM (so only SIGKILL ends it) and one that exits on it
STUBBORN = "import signal as s, time; s.signal(s.SIGTERM, s.SIG_IGN); print('ok', flush=True); time.sleep(60)"
POLITE = "import time; print('ok', flush=True); time.sleep(60)"


def _start(code: str) -> subprocess.Popen[str]:
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert p.stdout is not None and p.stdout.readline().strip() == "ok"  # its handlers are in place
    return p


def _start_time_from_proc(pid: int) -> int:
    # field 22 of /proc/PID/stat, counted from the command's closing parenthesis (the name may hold spaces)
    stat = Path(f"/proc/{pid}/stat").read_text()
    return int(stat[stat.rindex(")") + 2 :].split()[19])


def test_stop_processes_by_pid_and_start_time() -> None:
    polite, stubborn, spared = _start(POLITE), _start(STUBBORN), _start(POLITE)
    try:
        starts = {p.pid: _start_time_from_proc(p.pid) for p in (polite, stubborn, spared)}
        assert process_start(polite.pid) == starts[polite.pid]
        t0 = time.monotonic()
        # ``spared`` is listed with another start time: a reused PID, not the process that was released
        done = stop_processes(
            {
                polite.pid: starts[polite.pid],
                stubborn.pid: starts[stubborn.pid],
                spared.pid: starts[spared.pid] + 1,
            },
            grace_s=0.5,
        )
        assert sorted(done) == sorted([polite.pid, stubborn.pid])
        assert polite.wait(timeout=5) == -15 and stubborn.wait(timeout=5) == -9
        assert time.monotonic() - t0 >= 0.5  # the stubborn one had its grace before SIGKILL
        assert process_start(polite.pid) is None  # reaped: gone
        assert spared.poll() is None
    finally:
        for p in (polite, stubborn, spared):
            p.kill()
            p.wait(timeout=5)
            assert p.stdout is not None
            p.stdout.close()


def test_forget_script_removes_counters_pins_and_unshared_keys() -> None:
    pinned = nft.Pin(mark=0x43530007, src="10.0.0.1", dst="10.0.4.1", dport=40000, ports=())
    bare = nft.Pin(mark=0x43530007, src="10.0.0.1", dst="10.0.5.1", dport=40000, ports=())
    text = nft.forget_script("t1", "j7", [(pinned, 3), (bare, None)], ["10.0.0.1 . 10.0.4.1 . 40000"])
    lines = text.splitlines()
    assert lines[:4] == [f"delete counter inet t1 {c}_j7" for c in ("tx", "txd", "rxd", "held")]
    assert "delete element inet t1 pins { 0x43530007 . 10.0.0.1 . 10.0.4.1 . 40000 }" in lines
    assert "delete chain inet t1 pin_3" in lines
    assert not [x for x in lines if "10.0.5.1" in x]  # no ports were installed for it: no element, no chain
    assert lines[-1] == "delete element inet t1 known { 10.0.0.1 . 10.0.4.1 . 40000 }"
    # every counter the job's rules made is removed (the names jobs_script gave them)
    made = nft.jobs_script("t1", [nft.JobRules(mark=0x43530007, cgroup="x/a-j7", level=2, name="j7")])
    assert {x.split()[-1] for x in made.splitlines() if x.startswith("add counter")} == {
        x.split()[-1] for x in lines if x.startswith("delete counter")
    }
