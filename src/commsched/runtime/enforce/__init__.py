"""Transparent enforcement on unmodified jobs: cgroups, DSCP and pinned paths by the kernel.

The host agent (``commsched agent --enforce``) puts every job's processes in a cgroup of their own and
enforces the job's current decision on every TCP connection they open, without any change to the
program (a PyTorch script over gloo, NCCL's socket transport, ...). The core, directly here:
:mod:`.enforcer` (what it does), :mod:`.host` (what its parts share), :mod:`.pins` (the ports installed
per connection key), :mod:`.loops` (held connections, counters, profiles), :mod:`.reports` (a job's
connections, traffic and report), :mod:`.ledger` (what the agent made, removed after a crash). Its
rooms, each a package:

* :mod:`.pinning`: which source ports pin a connection's paths (path oracles, probing the fabric);
* :mod:`.marking`: the nftables rules and counters, the tracked connections, what NCCL is told;
* :mod:`.processes`: the jobs' cgroups and the processes started or adopted into them.

The core uses the rooms, ``pinning`` uses ``marking``, and nothing else crosses (held by
``tests/test_runtime_layout.py``). See ``docs/real-jobs.md``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from commsched.runtime.enforce.enforcer import Enforcer, EnforcerConfig

__all__ = ["Enforcer", "EnforcerConfig", "make_enforcer"]


def make_enforcer(
    follower: Any,
    *,
    testbed: str | None,
    ledger: Path | None,
    profile_window_s: float = 0.0,
    oracle: str | None = None,
    fabric: Path | None = None,
    probe_metrics: Any = None,
    slurm: bool = False,
) -> Enforcer:
    """The enforcer of an agent (``follower``: its link to the daemon), started on its last view.

    ``testbed``: the emulated fabric this host is on: its routers are the path oracle, its namespace
    is written in the ledger (``testbed down`` removes what a killed agent left) and the ledger goes
    to the testbed's state directory.

    ``oracle``: ``"routes"`` (the testbed's routers' own routes, the default on a testbed) or
    ``"probe"`` (TTL probes from this host, :mod:`.probeoracle`; the default elsewhere). Off a
    testbed the probing oracle needs the fabric's map (``fabric``: a file, :mod:`.fabricmap`; on a
    testbed its layout); without one connections are marked but not pinned (the report says why).
    ``probe_metrics``: where the probing oracle counts its probes (a
    :class:`~.probeoracle.ProbeRecorder`: the agent's metrics). ``slurm``: adopt the processes of
    the view's Slurm jobs (:mod:`.slurmprocs`) and beat for them.
    """
    from commsched.errors import CapabilityError, InputError
    from commsched.runtime.enforce.marking.nft import nft_argv
    from commsched.runtime.enforce.pinning.oracle import TestbedOracle
    from commsched.testbed.netns import missing_capability

    why = missing_capability()
    if why is not None:  # cgroups and nftables need what network namespaces need
        raise CapabilityError(why.replace("the testbed", "--enforce"), where="--enforce")
    nft_argv()  # the nft command exists, or a clear error now
    kind = oracle or ("routes" if testbed is not None else "probe")
    if kind not in ("routes", "probe"):
        raise InputError(f"bad oracle {kind!r}", where="--oracle", expected="probe or routes")
    if kind == "routes" and testbed is None:
        raise InputError(
            "the routers' routes are known on a testbed only", where="--oracle", expected="--testbed"
        )
    path_oracle: Any = None
    netns = None
    if testbed is not None:
        from commsched.testbed import Testbed
        from commsched.testbed.state import agents_dir

        tb = Testbed.load(testbed)
        if follower.host not in {str(h.id) for h in tb.topology.hosts}:
            raise InputError(f"no host {follower.host!r} on testbed {testbed!r}", where="--host")
        if kind == "routes":
            path_oracle = TestbedOracle(testbed)
        netns = tb.host_namespace(follower.host)
        ledger = agents_dir(testbed) / f"{follower.host}.json"
    if kind == "probe":
        path_oracle = _probe_oracle(testbed, fabric)
        if path_oracle is not None:
            path_oracle.recorder = probe_metrics
    cfg = EnforcerConfig(
        host=follower.host,
        ledger=ledger or Path(f"commsched-agent-{follower.host}.enforce.json"),
        netns=netns,
        label=testbed or "",
        profile_window_s=profile_window_s,
    )
    enforcer = Enforcer(cfg, oracle=path_oracle, poster=follower.post_profile)
    enforcer.start(follower.host_view)
    _start_replies(enforcer, path_oracle)
    follower.listeners.append(enforcer.apply_safely)
    if slurm:
        _watch_slurm(enforcer, follower)
    return enforcer


def _start_replies(enforcer: Enforcer, path_oracle: Any) -> None:
    """With the probing oracle, the reverse direction: the replies' ports (:mod:`.replies`)."""
    from commsched.runtime.enforce.pinning.probeoracle import ProbeOracle
    from commsched.runtime.enforce.pinning.replies import ReplyPorts

    if isinstance(path_oracle, ProbeOracle):
        replies = ReplyPorts(enforcer, path_oracle)
        replies.start()
        path_oracle.replies_by_peer = True
        enforcer.replies = replies


def _watch_slurm(enforcer: Enforcer, follower: Any) -> None:
    """Adopt the processes of the view's Slurm jobs and beat for them (:mod:`.slurmprocs`)."""
    from commsched.runtime.enforce.processes.slurmprocs import SlurmWatch

    watch = SlurmWatch(enforcer, beat=follower.heartbeat)
    enforcer.watchers.append(watch)
    watch.start()


def _probe_oracle(testbed: str | None, fabric: Path | None) -> Any:
    """The probing oracle on the fabric map of ``fabric`` (a file) or of the testbed; ``None`` without."""
    from commsched.runtime.enforce.pinning.fabricmap import load_fabric
    from commsched.runtime.enforce.pinning.pathprobe import FabricMap
    from commsched.runtime.enforce.pinning.probeoracle import ProbeOracle

    if fabric is not None:
        return ProbeOracle(load_fabric(fabric))
    if testbed is not None:
        return ProbeOracle(FabricMap.from_testbed(testbed))
    return None
