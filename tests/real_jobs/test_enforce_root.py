"""Transparent enforcement on a real (emulated) fabric: marks, pinned paths both ways, a decision that
changes mid-run, a killed agent, and the cleanup (root, nftables, tcpdump; skipped otherwise).

Two hosts under different ToRs of a 2 x 2 Clos; an echo server (job ``a``) on h1 and a client on h0,
both unmodified Python programs started by the hosts' enforcing agents. The client opens a new
connection every 0.3 s (unless told to pause) and keeps sending on the first one.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from commsched.testbed import netns

SERVER = """
import socket, sys, threading
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], int(sys.argv[2]))); s.listen(64)
def echo(c):
    while True:
        d = c.recv(1 << 16)
        if not d: break
        c.sendall(d)
while True:
    c, _ = s.accept(); threading.Thread(target=echo, args=(c,), daemon=True).start()
"""

CLIENT = """
import os, socket, sys, time
host, port, pause = sys.argv[1], int(sys.argv[2]), sys.argv[3]
first = socket.create_connection((host, port), timeout=30)
while True:
    socks = [first]
    if not os.path.exists(pause):
        c = socket.create_connection((host, port), timeout=30)
        print("conn", c.getsockname()[1], time.time(), flush=True)
        socks.append(c)
    for s in socks:
        s.sendall(b"x" * 20000); got = 0
        while got < 20000:
            got += len(s.recv(1 << 16))
    for s in socks[1:]:
        s.close()
    time.sleep(0.3)
"""


def _kill_ours(work: Path) -> None:
    """SIGKILL the processes this test started through the agents: those whose command line names a
    file under its own work directory (the job's server and client, and their output readers)."""
    me = os.getpid()
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == me:
            continue
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if any(a.decode(errors="replace").startswith(f"{work}/") for a in argv):
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(proc.name), signal.SIGKILL)


def _need_tools() -> None:
    why = netns.missing_capability()
    if why is not None:
        pytest.skip(why)
    for tool in ("nft", "tcpdump", "nsenter"):
        if shutil.which(tool) is None:
            pytest.skip(f"needs {tool!r} (Debian packages nftables, tcpdump, util-linux; make sysdeps)")
    from commsched.runtime.enforce.processes.cgroups import cgroup2_root

    try:
        cgroup2_root()
    except Exception as exc:
        pytest.skip(str(exc))


def _http(sock: Path, token: str | None = None) -> Any:
    import httpx

    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx.Client(
        transport=httpx.HTTPTransport(uds=str(sock)), base_url="http://x", headers=headers, timeout=30
    )


def _tables(ns: str) -> set[str]:
    out = netns.run(["nsenter", f"--net=/run/netns/{ns}", "nft", "list", "tables"], check=False)
    return {line.split()[-1] for line in out.splitlines() if line.startswith("table inet commsched_")}


def _packets(pcap: Path, src: str, dst: str) -> list[tuple[float, int, int, str]]:
    """(time, TOS, source port, TCP flags) of every TCP packet ``src -> dst`` in a capture; the
    flags of a pure ACK (ACK alone, no payload) are ``"ack"`` (tcpdump writes ``.`` and ``length 0``)."""
    out = subprocess.run(
        ["tcpdump", "-r", str(pcap), "-nn", "-v", "-tt", f"tcp and src host {src} and dst host {dst}"],
        capture_output=True, text=True, check=False,
    ).stdout  # fmt: skip
    rows = []
    head: tuple[float, int] | None = None
    for line in out.splitlines():
        if " IP (tos " in line:
            head = (float(line.split()[0]), int(line.split("tos ")[1].split(",")[0], 16))
        elif head is not None and " > " in line:
            port = int(line.split(" > ")[0].strip().rsplit(".", 1)[1])
            flags = line.split("Flags [")[1].split("]")[0] if "Flags [" in line else ""
            if flags == "." and line.rstrip().endswith(" length 0"):
                flags = "ack"
            rows.append((head[0], head[1], port, flags))
            head = None
    return rows


@pytest.mark.slow
def test_enforcement_on_the_fabric(  # noqa: PLR0915 -- one end-to-end run on the fabric, step by step
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _need_tools()
    from commsched.runtime.enforce.processes.cgroups import cgroup2_root
    from commsched.runtime.launch.procs import Processes, cli_argv
    from commsched.testbed import Testbed, build
    from commsched.testbed.probe import trace_tuples
    from commsched.testbed.state import agents_dir
    from commsched.topology.builders import two_layer_clos

    monkeypatch.setenv("COMMSCHED_TESTBED_DIR", str(tmp_path / "state"))
    name = f"cse{os.getpid() % 100000}"
    work = tmp_path / "w"
    work.mkdir()
    (work / "token").write_text("token-of-the-enforcement-test")
    (work / "srv.py").write_text(SERVER)
    (work / "cli.py").write_text(CLIENT)
    build.up(two_layer_clos(tors=2, aggs=2, hosts_per_tor=1), name=name, rate_scale=1e-3)
    tb = Testbed.load(name)
    procs = Processes(work)
    cap: subprocess.Popen[bytes] | None = None
    try:
        procs.start(
            "daemon",
            cli_argv("daemon", "--db", str(work / "d.db"), "--listen", f"unix:{work}/d.sock",
                     "--token-file", str(work / "token"), "--policy", "crux-full", "--topology",
                     "two_layer_clos", "-p", "tors=2", "-p", "aggs=2", "-p", "hosts_per_tor=1",
                     "--profiling-window", "0", "--heartbeat-timeout", "0"),
            capture_stdout=True,
        )  # fmt: skip
        procs.announced("daemon", 60)

        def agent(host: str, tag: str) -> None:
            nics = [a for nic, ip in tb.host_addresses(host).items() for a in ("--nic", f"{nic}={ip}")]
            argv = cli_argv("agent", "--daemon", f"unix:{work}/d.sock", "--host", host, "--listen",
                            f"unix:{work}/{host}.sock", "--token-file", str(work / "token"), "--state",
                            str(work / f"{host}.json"), "--wait", "1", "--enforce", "--testbed", name,
                            *nics)  # fmt: skip
            procs.start(f"agent-{host}{tag}", tb.nsenter_argv(host, argv), capture_stdout=True)
            procs.announced(f"agent-{host}{tag}", 60)

        agent("h0", "")
        agent("h1", "")
        token = "token-of-the-enforcement-test"
        with _http(work / "d.sock", token) as d:
            body = {"id": "a", "gpu_ids": ["h0/gpu0", "h1/gpu0"], "compute_s": 0.1, "comm_bytes": 1e6}
            assert d.post("/v1/jobs", json=body).status_code == 201
            first = d.get("/v1/decisions/latest").json()
        ip0, ip1 = tb.nic_address("h0/nic0"), tb.nic_address("h1/nic0")
        iface = tb.layout.nic_cable("h1/nic0").a.iface
        cap = subprocess.Popen(
            ["ip", "netns", "exec", tb.host_namespace("h1"), "tcpdump", "-i", iface, "-s", "96", "-U", "-w",
             str(work / "cap.pcap"), "tcp"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        time.sleep(1.0)
        server = [sys.executable, str(work / "srv.py"), ip1, "15000"]
        client = [sys.executable, str(work / "cli.py"), ip1, "15000", str(work / "pause")]
        for host, argv in (("h1", server), ("h0", client)):
            time.sleep(0.5)
            with _http(work / f"{host}.sock", token) as c:
                r = c.post("/v1/jobs/a/processes", json={"argv": argv, "log": str(work / f"{host}.out")})
                assert r.status_code == 201, r.text
        time.sleep(3.0)
        _decided_paths_both_ways(tb, work, token, first, ip0, ip1, trace_tuples)

        # a third job arrives: job a's class, and so its marks, change; new connections follow
        with _http(work / "d.sock", token) as d:
            c3 = {"id": "c", "gpu_ids": ["h0/gpu2", "h1/gpu2"], "compute_s": 5.0, "comm_bytes": 1e6}
            t_change = time.time()
            assert d.post("/v1/jobs", json=c3).status_code == 201
            second = d.get("/v1/decisions/latest").json()
        assert second["jobs"]["a"]["dscp"] != first["jobs"]["a"]["dscp"]
        time.sleep(3.0)
        with _http(work / "h0.sock", token) as c:
            held_before_kill = c.get("/v1/jobs/a").json()["held_syns"]
            pins = c.get("/v1/jobs/a").json()["pins"]

        # the agent of h0 dies: its marks stay (the client keeps sending on its first connection and
        # opens no new one meanwhile); the agent's next start takes over and removes the old rules
        (work / "pause").write_text("")
        time.sleep(0.5)
        old_tables = _tables(tb.host_namespace("h0"))
        old_cgroups = {p.name for p in cgroup2_root().glob(f"commsched-{name}-h0-*")}
        procs.procs["agent-h0"].kill()
        procs.procs["agent-h0"].wait(timeout=10)
        t_kill = time.time()
        time.sleep(2.0)
        assert _tables(tb.host_namespace("h0")) == old_tables  # nothing removed the marks
        agent("h0", "-2")
        t_new = time.time()
        (work / "pause").unlink()  # new connections again: the new agent holds and pins them
        time.sleep(3.0)
        t_end = time.time()
        new_tables = _tables(tb.host_namespace("h0"))
        assert len(new_tables) == 1 and not (new_tables & old_tables)
        now_cgroups = {p.name for p in cgroup2_root().glob(f"commsched-{name}-h0-*")}
        assert now_cgroups and not (now_cgroups & old_cgroups)
        with _http(work / "h0.sock", token) as c:
            rep = c.get("/v1/jobs/a").json()
        assert rep["pids"], "the client was adopted by the new agent"
        # each port set against the decision it was searched for (a profile posted by the new agent
        # may bring a decision after the second one)
        versions = {x["decision"] for pins_ in (pins, rep["pins"]) for p in pins_ for x in p["sets"]}
        with _http(work / "d.sock", token) as d:
            by_version = {v: d.get(f"/v1/decisions/{v}").json() for v in versions}
        cap.send_signal(signal.SIGINT)
        cap.wait(timeout=10)
        _marks_and_ports(
            work / "cap.pcap", ip0, ip1, first, second, pins, rep["pins"], t_change, t_kill, t_end, t_new,
            by_version,
        )  # fmt: skip
        assert held_before_kill == 1  # the first connection's first SYN only: nothing dropped after it
    finally:
        if cap is not None and cap.poll() is None:
            cap.kill()
            cap.wait(timeout=10)
        procs.close()
        _kill_ours(work)  # the job's processes outlive a stopped agent by design
        down = subprocess.run(
            [*cli_argv("testbed", "down", name)], capture_output=True, text=True, check=False, timeout=120
        )
    assert down.returncode == 0, down.stderr
    assert not list(cgroup2_root().glob(f"commsched-{name}-*")), "testbed down removed every cgroup"
    assert not agents_dir(name).exists()
    assert not [ns for ns in netns.list_namespaces() if ns.startswith(f"{name}-")]


def _decided_paths_both_ways(
    tb: Any, work: Path, token: str, decision: dict[str, Any], ip0: str, ip1: str, trace: Any
) -> None:
    """Every connection of the client is pinned; the routers send it, and its replies, on the
    decided paths (traced with the 4-tuple the wire sees)."""
    with _http(work / "h0.sock", token) as c:
        conns = [
            x for x in c.get("/v1/jobs/a/connections").json()["connections"] if x["role"] == "connecting"
        ]
    assert len(conns) >= 3
    fwd = next(x["links"] for x in decision["connections"] if x["src"] == "h0/gpu0")
    rev = next(x["links"] for x in decision["connections"] if x["src"] == "h1/gpu0")
    nic = {ip0: "h0/nic0", ip1: "h1/nic0"}
    for x in conns:
        assert x["pinned"], x
        port, dport = x["wire_sport"], x["remote"][1]
        f, r = trace(tb.layout, [(nic[ip0], nic[ip1], port, dport), (nic[ip1], nic[ip0], dport, port)])
        assert [int(v) for v in f] == fwd and [int(v) for v in r] == rev


def _marks_and_ports(
    pcap: Path, ip0: str, ip1: str, first: dict[str, Any], second: dict[str, Any], pins: list[dict[str, Any]],
    later: list[dict[str, Any]], t_change: float, t_kill: float, t_end: float, t_new: float,
    by_version: dict[int, dict[str, Any]],
) -> None:  # fmt: skip
    """Every packet of the job, both ways, has its class's DSCP: the first class before the change,
    the second one from a second after it on, also after the agent was killed; pure ACKs have the
    control class's (DSCP 48, CS6: TOS 0xc0) throughout; the connections opened from a second after the
    change on leave from the ports decided for the new decision."""
    tos1, tos2 = first["jobs"]["a"]["tos"], second["jobs"]["a"]["tos"]
    assert 0xC0 not in {tos1, tos2}, (tos1, tos2)  # no job class is the control class
    for src, dst in ((ip0, ip1), (ip1, ip0)):
        rows = _packets(pcap, src, dst)
        assert len(rows) > 50
        acks = [tos for _, tos, _, fl in rows if fl == "ack"]
        assert len(acks) > 10 and set(acks) == {0xC0}, sorted(set(acks))
        assert {tos for t, tos, _, fl in rows if t < t_change and fl != "ack"} == {tos1}
        bad = [
            (round(t - t_change, 3), tos, sp, fl)
            for t, tos, sp, fl in rows
            if t > t_change + 1.0 and tos != tos2 and fl != "ack"
        ]
        assert not bad, (bad[:4], round(t_kill - t_change, 3), round(t_new - t_change, 3))
        late = sorted({int(t - t_kill) for t, *_ in rows if t > t_kill - 3})
        assert any(t > t_kill + 0.5 for t, *_ in rows) and any(t > t_end - 1.0 for t, *_ in rows), (
            src,
            late,
            round(t_end - t_kill, 2),
            (pcap.parent / "h0.out").read_text()[-300:],
        )
    # every connection opened from a second after the change left from a port of a set searched for
    # the new decision's paths (by the first agent, then by its successor)
    sets = [x for pins_ in (pins, later) for p in pins_ if p["dst"] == ip1 for x in p["sets"]]

    def links(version: int, src: str) -> list[int]:
        return next(c["links"] for c in by_version[version]["connections"] if c["src"] == src)

    ports = {p for x in sets if x["decision"] >= second["version"] for p in x["ports"]}
    assert all(
        x["forward"] == links(x["decision"], "h0/gpu0") and x["reverse"] == links(x["decision"], "h1/gpu0")
        for x in sets
        if x["decision"] >= second["version"]
    )
    syns = [sp for t, _, sp, flags in _packets(pcap, ip0, ip1) if flags == "S" and t > t_change + 1.0]
    assert len(syns) >= 8 and set(syns) <= ports
