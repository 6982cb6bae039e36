"""The pure parts of transparent enforcement and of command jobs (no root, no network)."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from commsched.errors import InputError, ValidationError
from commsched.runtime.enforce.ledger import Ledger, clean_dir, read_ledger, write_ledger
from commsched.runtime.enforce.marking import nft
from commsched.runtime.enforce.marking.conns import parse_conntrack, parse_proc_tcp
from commsched.runtime.enforce.marking.nccl import class_table, job_environment
from commsched.runtime.enforce.marking.nflink import decode_objects, dump_request
from commsched.runtime.enforce.pinning.oracle import PortSearch, find_ports
from commsched.runtime.enforce.processes.cgroups import JobCgroup, parse_mountinfo


def test_nft_scripts_name_every_rule_and_key() -> None:
    jobs = [nft.JobRules(mark=0x43530007, cgroup="unified/commsched-x/a-j7", level=2, name="j7")]
    text = nft.jobs_script("t1", jobs)
    assert 'socket cgroupv2 level 2 "unified/commsched-x/a-j7" ct mark set 0x43530007' in text
    assert "add counter inet t1 held_j7" in text and "drop" in text
    assert "add counter" not in nft.jobs_script("t1", jobs, made=["j7"])
    assert "ack" not in text  # no ACK rule unless asked: every packet keeps its connection's class
    acks = nft.jobs_script("t1", jobs, ack_dscp=46)
    rule = "ct mark 0x43530007 meta l4proto tcp tcp flags & (fin|syn|rst|psh|ack) == ack meta length < 100"
    assert f"{rule} ip dscp set 46" in acks
    assert acks.index("vmap @dscp") < acks.index(rule)  # after the class's DSCP, which it overrides
    assert "0x43530007 : jump dscp_46" in nft.marks_script("t1", {0x43530007: 46})
    pin = nft.Pin(mark=0x43530007, src="10.0.0.1", dst="10.0.4.1", dport=40000, ports=(20003, 20017))
    first = nft.pin_script("t1", pin, 3, old_chain=None, known=False)
    assert "numgen inc mod 2 map { 0 : 20003, 1 : 20017 }" in first
    assert "add element inet t1 known { 10.0.0.1 . 10.0.4.1 . 40000 }" in first
    again = nft.pin_script("t1", pin, 4, old_chain=3, known=True)
    assert again.index("delete element") < again.index("add chain") and "delete chain inet t1 pin_3" in again
    assert "known" not in again
    assert "timeout 4000ms" in nft.alive_script("t1", [0x43530007], 4.0)
    assert nft.delete_table_script("t1") == "delete table inet t1\n"


def test_proc_parsers() -> None:
    tcp = (
        "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
        "   0: 0100000A:9C40 0104000A:3A98 02 00000000:00000000 00:00000000 00000000     0        0 777 1\n"
    )
    (s,) = parse_proc_tcp(tcp)
    assert (
        s.local == ("10.0.0.1", 40000) and s.remote == ("10.0.4.1", 15000) and s.state == 2 and s.inode == 777
    )
    line = (
        "ipv4 2 tcp 6 300 ESTABLISHED src=10.0.0.1 dst=10.0.4.1 sport=40000 dport=15000 packets=9 "
        "bytes=900 src=10.0.4.1 dst=10.0.0.1 sport=15000 dport=20011 packets=4 bytes=400 [ASSURED] "
        "mark=7 zone=0 use=2\nipv4 2 udp 17 30 src=1.1.1.1 dst=2.2.2.2 sport=1 dport=2 src=2.2.2.2 "
        "dst=1.1.1.1 sport=2 dport=1 mark=0\n"
    )
    (t,) = parse_conntrack(line)
    assert t.wire_sport == 20011 and t.mark == 7 and (t.orig_bytes, t.reply_bytes) == (900, 400)
    assert parse_mountinfo("30 1 0:26 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n") == [Path("/sys/fs/cgroup")]


def test_counter_dump_round_trip() -> None:
    """The request names the table; a reply with two counters and the end of the dump decodes."""
    req = dump_request("tbl", seq=5)
    assert b"tbl\0" in req and struct.unpack_from("=I", req)[0] == len(req)

    def attr(kind: int, payload: bytes) -> bytes:
        raw = struct.pack("=HH", 4 + len(payload), kind) + payload
        return raw + b"\0" * (-len(raw) % 4)

    def obj(name: str, packets: int, nbytes: int) -> bytes:
        data = attr(2, struct.pack(">Q", packets)) + attr(1, struct.pack(">Q", nbytes))
        body = struct.pack("=BBH", 1, 0, 0) + attr(2, name.encode() + b"\0") + attr(4 | 0x8000, data)
        return struct.pack("=IHHII", 16 + len(body), (10 << 8) | 18, 2, 5, 0) + body

    done = struct.pack("=IHHII", 20, 3, 2, 5, 0) + struct.pack("=i", 0)
    got, end = decode_objects(obj("tx_j1", 3, 4096) + obj("rxd_j1", 1, 60) + done)
    assert end and got["tx_j1"].bytes == 4096 and got["rxd_j1"].packets == 1
    err = struct.pack("=IHHII", 20, 2, 0, 5, 0) + struct.pack("=i", -2)
    with pytest.raises(OSError):
        decode_objects(err)


def test_port_search_meets_both_directions() -> None:
    class Oracle:
        def trace(self, flows: list[tuple[str, str, int, int]]) -> list[tuple[int, ...]]:
            return [(1,) if (sp if s == "a" else dp) % 3 == 0 else (2,) for s, _d, sp, dp in flows]

        def n_paths(self, src: str, dst: str) -> int:
            return 2

    ports = find_ports(Oracle(), PortSearch(src="a", dst="b", dport=7, forward=(1,), reverse=(1,), want=4))
    assert len(ports) == 4 and all(p % 3 == 0 for p in ports)
    assert (
        find_ports(Oracle(), PortSearch(src="a", dst="b", dport=7, forward=(9,), reverse=None, max_tries=512))
        == ()
    )


def test_ledger_round_trip_and_clean_without_leftovers(tmp_path: Path) -> None:
    root = tmp_path / "cg"
    job_dir = root / "commsched-x" / "a-j1"
    job_dir.mkdir(parents=True)
    led = Ledger(
        agent_pid=1,
        netns="no-such-netns-for-this-test",
        table="commsched_test_never_made",
        cgroup_root=str(root),
        cgroup_parent=str(root / "commsched-x"),
        jobs={"a": {"mark": 5, "cgroup": str(job_dir)}},
    )
    write_ledger(tmp_path / "agents" / "h0.json", led)
    assert read_ledger(tmp_path / "agents" / "h0.json") == led
    removed = clean_dir(tmp_path / "agents", kill=False)
    assert not job_dir.exists() and not (root / "commsched-x").exists() and not (tmp_path / "agents").exists()
    assert any("a-j1" in r for r in removed)
    assert JobCgroup(path=job_dir, root=root).level == 2


def test_nccl_environment_table() -> None:
    table = class_table(8)
    assert [r["dscp"] for r in table] == [46, 40, 34, 32, 26, 18, 10, 0]
    assert all(r["traffic_class"] == r["dscp"] << 2 for r in table)
    out = job_environment(
        {"class": 2, "dscp": 34},
        ["10.0.0.1", "10.0.0.2"],
        interfaces={"10.0.0.1": "c0", "10.0.0.2": "c2"},
        hcas={"c0": "mlx5_0"},
    )
    env = out["env"]
    assert env["NCCL_IB_TC"] == "136" and env["NCCL_IB_SL"] == "2"
    assert env["NCCL_SOCKET_IFNAME"] == "=c0,c2" and env["NCCL_IB_HCA"] == "=mlx5_0"


def test_command_jobs_in_scenarios() -> None:
    from commsched.io.scenario import scenario_from_data

    base = {"topology": {"kind": "crux_testbed"}, "horizon_s": 60}
    job = {"id": "a", "hosts": ["h0", "h4"], "gpus_per_host": 1, "command": ["python", "train.py"]}
    with pytest.raises(ValidationError, match="runs a command and declares no compute_s"):
        scenario_from_data({**base, "jobs": [job]}, source="x")
    sc = scenario_from_data({**base, "jobs": [job]}, source="x", measured_commands=True)
    assert sc.jobs[0].command == ("python", "train.py") and not sc.jobs[0].declared
    bad = {**job, "compute_s": 0.1, "comm_bytes": 1e6, "iteration_log": "iteration (\\d+) ([0-9.]+)"}
    with pytest.raises(ValidationError, match="2 groups"):
        scenario_from_data({**base, "jobs": [bad]}, source="x")
    with pytest.raises(ValidationError, match="without a command"):
        scenario_from_data(
            {
                **base,
                "jobs": [{"id": "b", "gpus": 2, "compute_s": 1, "comm_bytes": 1, "iteration_log": "(x)"}],
            },
            source="x",
        )


def test_collectives_not_run_say_why() -> None:
    from commsched.experiments.testbed_run.layout import NOT_RUN, job_layouts
    from commsched.io.scenario import scenario_from_data
    from commsched.workload.collectives import collective_registry

    assert set(NOT_RUN) | {"ring", "hierarchical_ring"} == set(collective_registry().names())
    sc = scenario_from_data(
        {"topology": {"kind": "crux_testbed"}, "horizon_s": 60, "jobs": [
            {"id": "a", "hosts": ["h0", "h4"], "compute_s": 1, "comm_bytes": 1e6,
             "collective": "halving_doubling"}]},
        source="x",
    )  # fmt: skip
    with pytest.raises(InputError, match="no halving-doubling all-reduce"):
        job_layouts(sc, sc.topology, {})
