"""The agent's transparent enforcement: a cgroup per job, its marks and paths in one nftables table.

:class:`Enforcer` owns what the agent makes on its host (see :mod:`.nft` for the table and
:mod:`.ledger` for the write-ahead list of it) and keeps it in line with the daemon's decisions:

* every job of the host's view gets a cgroup and a connection mark; processes enter the cgroup when
  the agent starts them (:meth:`Enforcer.spawn`) or adopts them by PID (:meth:`Enforcer.adopt`);
* :meth:`Enforcer.apply` (each new decision) sets the DSCP of every job's mark at once and re-pins
  the ``(source, destination, port)`` keys whose decided paths changed (their next connections);
* a new connection towards an undecided key is held (its first SYN dropped, see :mod:`.nft`) while
  :meth:`Enforcer.pin` asks the path oracle for ports that put both directions on their decided paths
  (:mod:`.pinning.oracle`) and installs them; the loops of :mod:`.loops` find such connections, refresh the
  hold, and sample the jobs' byte counters;
* a restarted agent takes over: it adopts the processes of its predecessor's cgroups (same marks,
  so their open connections keep their DSCP), then removes the predecessor's table and cgroups.
"""

from __future__ import annotations

import contextlib
import os
import re
import threading
from collections import deque
from pathlib import Path
from typing import Any

from commsched.errors import InputError, TestbedError
from commsched.runtime.enforce import reports
from commsched.runtime.enforce.host import EnforcerConfig, JobState, ProfilePoster
from commsched.runtime.enforce.ledger import Ledger, LedgerJobJSON, clean, read_ledger, write_ledger
from commsched.runtime.enforce.loops import Loops
from commsched.runtime.enforce.marking import nft
from commsched.runtime.enforce.pinning.oracle import PathOracle
from commsched.runtime.enforce.pins import Pinning
from commsched.runtime.enforce.processes.cgroups import JobCgroup, cgroup2_root, descendants
from commsched.runtime.enforce.processes.spawn import JobProcess, ProcessSpec
from commsched.runtime.protocol.control import HostView

__all__ = ["MARK_BASE", "Enforcer", "EnforcerConfig"]

#: connection marks of the jobs: ``MARK_BASE | n`` ("CS" in the upper half)
MARK_BASE = 0x43530000
_SLUG = re.compile(r"[^A-Za-z0-9_-]")


class Enforcer:
    """Transparent enforcement of one host's decisions (see the module docstring)."""

    def __init__(
        self,
        cfg: EnforcerConfig,
        *,
        oracle: PathOracle | None,
        poster: ProfilePoster | None = None,
    ) -> None:
        self.cfg = cfg
        self.oracle = oracle
        self.poster = poster
        self.root = cgroup2_root()
        tag = _SLUG.sub("-", "-".join(x for x in (cfg.label, cfg.host, str(os.getpid())) if x))
        self.table = "commsched_" + tag.replace("-", "_")
        self.parent = self.root / f"commsched-{tag}"
        self.lock = threading.RLock()
        self.jobs: dict[str, JobState] = {}
        self.view = HostView(version=0, policy="", host=cfg.host)
        self._made: set[str] = set()
        self._marks: dict[str, int] = {}
        self.pinning = Pinning(self)
        #: the probing oracle's reverse direction (:mod:`.replies`): the replies' source ports, or None
        self.replies: Any = None
        self._loops: Any = None
        self.failures: list[str] = []
        self._acct: str | None = None
        #: helpers with threads of their own, stopped first at :meth:`close` (``stop()``, ``errors``)
        self.watchers: list[Any] = []

    # ------------------------------------------------------------------ lifecycle

    def ledger(self) -> Ledger:
        """What this enforcer made, as its ledger records it."""
        jobs: dict[str, LedgerJobJSON] = {
            j.id: {"mark": j.mark, "cgroup": str(j.cgroup.path), "pins": self.pinning.history(j.mark)}
            for j in self.jobs.values()
        }
        return Ledger(
            agent_pid=os.getpid(),
            netns=self.cfg.netns,
            table=self.table,
            cgroup_root=str(self.root),
            cgroup_parent=str(self.parent),
            jobs=jobs,
        )

    def start(self, view: HostView) -> list[str]:
        """Make the table, take over from a predecessor's ledger, apply ``view``, start the loops.

        Returns what was removed of the predecessor's (one line each).
        """
        old = read_ledger(self.cfg.ledger)
        if old is not None:
            self._marks.update({k: v["mark"] for k, v in old.jobs.items()})
            for info in old.jobs.values():  # what its connections were pinned to (the report)
                self.pinning.inherit(info["mark"], info.get("pins", []))
        write_ledger(self.cfg.ledger, self.ledger())
        nft.run_nft(nft.base_script(self.table))
        self._acct = _set_acct()
        self.apply(view)
        removed: list[str] = []
        if old is not None and old.table != self.table:
            for job, info in old.jobs.items():
                cg = JobCgroup(path=Path(str(info["cgroup"])), root=Path(old.cgroup_root))
                pids = cg.pids()
                if pids:
                    self.adopt(job, pids, children=False)
            removed = clean(old, kill=False, current_netns=True)
        self._loops = Loops(self)
        self._loops.start()
        return removed

    def close(self, *, stop_processes: bool = False) -> list[str]:
        """Stop the loops; remove what the enforcer made, except what running jobs need; what went.

        ``stop_processes``: stop every process of the jobs first (the ones the agent started: SIGTERM,
        SIGKILL after 3 s; then the rest of each cgroup, adopted ones included). Every job with no
        process left is then forgotten (cgroup, rules, counters, pins), and when none is left the
        table and the ledger go too. Jobs still running keep their cgroup and the table, listed by the
        ledger: their connections keep their marks and translated source ports (without the table's
        nat chain the kernel would stop translating their open connections, and the peers would reset
        them) until the next agent adopts them or ``testbed down`` stops them.
        """
        self._stop_threads()
        with self.lock:
            if stop_processes:
                for job in self.jobs.values():
                    for p in job.procs.values():
                        p.stop()
                    job.cgroup.stop()
            for idle in [j.id for j in self.jobs.values() if not j.cgroup.pids()]:
                try:
                    self.remove(idle)
                except Exception as exc:  # the job stays listed in the ledger; testbed down removes it
                    self.failures.append(f"remove {idle}: {type(exc).__name__}: {exc}")
            if self.jobs:
                write_ledger(self.cfg.ledger, self.ledger())
                return []
            removed = clean(self.ledger(), kill=False, current_netns=True)
            self.cfg.ledger.unlink(missing_ok=True)
            if self._acct is not None:
                _set_acct(self._acct)
        return removed

    def _stop_threads(self) -> None:
        for w in self.watchers:
            w.stop()
        if self._loops is not None:
            self._loops.stop()
        if self.replies is not None:
            self.replies.stop()
        self.pinning.close()

    def errors(self) -> list[str]:
        """The last errors of the background loops (a failed ``nft`` call, no netlink, ...)."""
        loops = list(self._loops.errors) if self._loops is not None else []
        return self.failures + loops + [m for w in self.watchers for m in w.errors]

    # ------------------------------------------------------------------ jobs

    def _mark_for(self, job: str) -> int:
        """The job's connection mark: its predecessor's (a takeover), else a new one.

        New marks start from this agent's process id, so that the tracked connections another
        agent left in this namespace (closing, in ``TIME_WAIT``) are not taken for this one's.
        """
        if job not in self._marks:
            used = set(self._marks.values())
            base = (os.getpid() * 64) & 0xFFFF
            n = next(
                (base + i) & 0xFFFF for i in range(1, 0xFFFF) if MARK_BASE | ((base + i) & 0xFFFF) not in used
            )
            self._marks[job] = MARK_BASE | n
        return self._marks[job]

    def ensure_job(self, job: str) -> JobState:
        """The job's state, making its cgroup and rules on first use (ledger written first)."""
        with self.lock:
            if job in self.jobs:
                return self.jobs[job]
            mark = self._mark_for(job)
            name = f"j{mark & 0xFFFF}"
            slug = _SLUG.sub("-", job)[:48] or "job"
            state = JobState(
                id=job,
                mark=mark,
                name=name,
                cgroup=JobCgroup(path=self.parent / f"{slug}-{name}", root=self.root),
                samples=deque(maxlen=self.cfg.max_samples),
                profile_window_s=self.cfg.profile_window_s,
            )
            self.jobs[job] = state
            write_ledger(self.cfg.ledger, self.ledger())
            state.cgroup.create()
            self._rules()
            self.refresh_alive()
            return state

    def refresh_alive(self) -> None:
        """Let the hold catch the jobs' new connections for another ``hold_timeout_s`` (every job)."""
        with self.lock:
            marks = [j.mark for j in self.jobs.values()]
            nft.run_nft(nft.alive_script(self.table, marks, self.cfg.hold_timeout_s))

    def _rules(self) -> None:
        rules = [
            nft.JobRules(mark=j.mark, cgroup=j.cgroup.nft_path, level=j.cgroup.level, name=j.name)
            for j in self.jobs.values()
        ]
        nft.run_nft(nft.jobs_script(self.table, rules, made=self._made, ack_dscp=self.cfg.ack_dscp))
        self._made.update(j.name for j in self.jobs.values())

    def job(self, job: str) -> JobState:
        with self.lock:
            if job not in self.jobs:
                raise InputError(f"no job {job!r} on host {self.cfg.host!r}", where="job")
            return self.jobs[job]

    def adopt(self, job: str, pids: list[int], *, children: bool = True) -> list[int]:
        """Move ``pids`` (and their descendants) into the job's cgroup; returns every PID moved.

        Sockets opened before the move keep their old cgroup (the kernel fixes it when a socket is
        made), so only the connections the processes open afterwards are enforced.
        """
        state = self.ensure_job(job)
        moved: list[int] = []
        for pid in pids:
            for p in descendants(pid) if children else [pid]:
                state.cgroup.add(p)
                moved.append(p)
        return moved

    def spawn(self, job: str, spec: ProcessSpec) -> JobProcess:
        """Start ``spec`` inside the job's cgroup (its master address pinned first, when remote)."""
        state = self.ensure_job(job)
        host, port = spec.env.get("MASTER_ADDR"), spec.env.get("MASTER_PORT")
        if host and port and port.isdigit():
            self.prepin(job, host, int(port))
        proc = JobProcess(spec, cgroup_procs=state.cgroup.path / "cgroup.procs", base_env=os.environ)
        with self.lock:
            state.procs[proc.pid] = proc
        return proc

    def stop(self, job: str, grace_s: float = 3.0) -> dict[int, int | None]:
        """Stop every process the agent started for ``job``; their exit codes."""
        state = self.job(job)
        return {pid: p.stop(grace_s) for pid, p in list(state.procs.items())}

    def remove(self, job: str) -> None:
        """Forget ``job``: its rules, counters, pins and (empty, or emptied) cgroup."""
        with self.lock:
            state = self.jobs.pop(job, None)
            if state is None:
                return
            state.cgroup.release()
            state.cgroup.remove()
            mine = {k: st for k, st in self.pinning.pins.items() if k[0] == state.mark}
            self.pinning.forget(state.mark)
            self._rules()
            self._made.discard(state.name)
            others = {k[1:] for k in self.pinning.pins}
            pins = [
                (nft.Pin(mark=k[0], src=k[1], dst=k[2], dport=k[3], ports=()), st.chain)
                for k, st in mine.items()
            ]
            known = [f"{k[1]} . {k[2]} . {k[3]}" for k in mine if k[1:] not in others]
            _forget(nft.forget_script(self.table, state.name, pins, known))
            self.refresh_alive()  # its SYNs are held no more
            write_ledger(self.cfg.ledger, self.ledger())

    # ------------------------------------------------------------------ decisions

    def apply(self, view: HostView) -> None:
        """Follow a new host view: jobs, DSCP per mark (at once), fabric addresses, changed pins."""
        with self.lock:
            self.view = view
            for job in view.jobs:
                self.ensure_job(job)
            dscp = {self.jobs[j].mark: info.mark.dscp for j, info in view.jobs.items() if j in self.jobs}
            ips = view.nic_ips
            remote = {ips[c.dst_nic] for c in view.connections if c.dst_nic in ips}
            remote |= {ips[c.src_nic] for c in view.inbound if c.src_nic in ips}
            nft.run_nft(nft.marks_script(self.table, dscp) + nft.fabric_script(self.table, remote))
        self.pinning.refresh()

    def apply_safely(self, view: HostView) -> None:
        """:meth:`apply` for the follower's thread: a failure is kept (``/health``), not raised."""
        try:
            self.apply(view)
        except Exception as exc:  # the agent keeps following; the error is reported
            self.failures.append(f"apply version {view.version}: {type(exc).__name__}: {exc}")
            del self.failures[:-20]

    def prepin(self, job: str, dst: str, dport: int) -> None:
        """Pin ``job``'s connections to ``dst:dport`` now (the source the kernel would choose)."""
        self.pinning.prepin(self.ensure_job(job).mark, dst, dport)

    def request_pin(self, key: tuple[int, str, str, int]) -> None:
        self.pinning.request(key)

    # ------------------------------------------------------------------ reports

    def connections(self, job: str) -> list[reports.ConnectionRowJSON]:
        """The job's tracked connections on this host, each with its pin (connecting side only)."""
        return reports.connections(self, self.job(job))

    def traffic(self, job: str, since: float = 0.0) -> reports.TrafficJSON:
        """The job's counter samples after ``since``: time, data bytes, all bytes, held SYNs."""
        return reports.traffic(self, self.job(job), since)

    def report(self, job: str) -> reports.ReportJSON:
        """The job's cgroup, processes, counters and posted profile on this host."""
        return reports.report(self, self.job(job))

    def forget_idle(self) -> None:
        """Remove the jobs that left the decision and have no process left here."""
        with self.lock:
            idle = [
                j.id
                for j in self.jobs.values()
                if j.id not in self.view.jobs
                and not j.cgroup.pids()
                and all(p.returncode() is not None for p in j.procs.values())
            ]
        for job in idle:
            with contextlib.suppress(Exception):
                self.remove(job)


def _forget(script: str) -> None:
    """Apply a :func:`.nft.forget_script` at once, or, where a part of it is gone already (the whole
    transaction is then refused), line by line, each part that is still there."""
    try:
        nft.run_nft(script)
    except TestbedError:
        for line in script.splitlines():
            with contextlib.suppress(TestbedError):
                nft.run_nft(line + "\n")


_ACCT = Path("/proc/sys/net/netfilter/nf_conntrack_acct")


def _set_acct(value: str = "1") -> str | None:
    """Turn on byte counts per tracked connection (the report's bytes per connection) in this
    network namespace; returns the previous value (``None``: unchanged or not settable)."""
    try:
        old = _ACCT.read_text().strip()
        if old != value:
            _ACCT.write_text(value)
            return old
    except OSError:
        pass
    return None
