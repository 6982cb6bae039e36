"""The nftables rules of one agent: text of atomic transactions (pure), and the one call that applies them.

One table per agent, ``inet`` family, named by the agent (every rule the agent makes is in it and goes
with ``nft delete table inet NAME``)::

    table inet NAME {
      map dscp    mark : verdict               job mark -> jump dscp_D (its class's DSCP)
      set fabric  ipv4_addr                    addresses the jobs' decisions reach
      set known   ipv4_addr . ipv4_addr . inet_service     (src, dst, dport) decided
      set alive   mark, with timeouts          jobs whose first SYNs may be held
      map pins    mark . ipv4_addr . ipv4_addr . inet_service : verdict
      counter tx_J, txd_J, rxd_J, held_J      per job: bytes out, data bytes out / in, SYNs held
      chain out   filter output mangle         socket cgroupv2 level L "PATH" ct mark set M;
                                               counters; ct mark vmap @dscp; pure ACKs' DSCP;
                                               the hold
      chain in    filter input mangle          socket cgroupv2 ... ct mark set M (its listeners)
      chain post  nat postrouting srcnat       ct mark . ip saddr . ip daddr . tcp dport vmap @pins
      chain pin_N                              snat ip to SRC : numgen inc mod K map { 0 : P0, ... }
      chain dscp_D                             ip dscp set D (D = 0..63: nft sets no DSCP from a map)
    }

Marks live on the connection (conntrack), so every packet of a job's connection carries the DSCP of
the job's current class, in both directions on the host that owns the socket: packets the program
sends, the kernel's SYN-ACKs of its listeners (matched on input), data-carrying ACKs and resets. The
one exception is the pure ACK (ACK flag alone, no payload): it carries the control class's DSCP
(``ack_dscp``; 48, above every job class, :data:`commsched.scheduling.dscp.CONTROL_DSCP`), so that
on the reverse path no job's acknowledgements wait behind data, a higher class's or its own class's
(the fluid model's strict priority and fair share act on the data alone).

Source-port translation happens once per connection (the first packet, ``nat`` chains see only new
connections), so a new decision changes the ports of the job's *next* connections; it changes the
DSCP map at once, and so the marks of every open connection.

The hold rule drops the first SYN of a job's connection to a destination on the fabric whose
``(source, destination, port)`` has no decision yet, while the job is in ``alive`` (an element with
a timeout the agent keeps refreshing): TCP sends the SYN again after one second, by which time the
agent has probed the ports and added the pin. When the agent dies the element expires and no SYN is
held any more (new connections then go unpinned, with their marks).
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from commsched.errors import CapabilityError, TestbedError

__all__ = [
    "JobRules",
    "Pin",
    "alive_script",
    "base_script",
    "delete_table_script",
    "fabric_script",
    "forget_script",
    "jobs_script",
    "marks_script",
    "nft_argv",
    "pin_script",
    "run_nft",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class JobRules:
    """One job's rules: its connection mark, cgroup (nft path and level) and counter suffix."""

    mark: int
    cgroup: str
    level: int
    name: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Pin:
    """Connections ``src -> dst:dport`` of job ``mark`` get one of ``ports`` (empty: not translated)."""

    mark: int
    src: str
    dst: str
    dport: int
    ports: tuple[int, ...]

    @property
    def key(self) -> str:
        return f"{self.mark:#x} . {self.src} . {self.dst} . {self.dport}"


def base_script(table: str) -> str:
    """Create the table with its sets, maps and base chains (all empty)."""
    dscp = "".join(f"  chain dscp_{d} {{ ip dscp set {d}; }}\n" for d in range(64))
    return f"""table inet {table} {{
{dscp}  map dscp {{ type mark : verdict; }}
  set fabric {{ type ipv4_addr; }}
  set known {{ type ipv4_addr . ipv4_addr . inet_service; }}
  set alive {{ type mark; flags timeout; }}
  map pins {{ type mark . ipv4_addr . ipv4_addr . inet_service : verdict; }}
  chain out {{ type filter hook output priority mangle; policy accept; }}
  chain in {{ type filter hook input priority mangle; policy accept; }}
  chain post {{ type nat hook postrouting priority srcnat; policy accept;
    ct mark . ip saddr . ip daddr . tcp dport vmap @pins
  }}
}}
"""


def jobs_script(
    table: str, jobs: Iterable[JobRules], *, made: Iterable[str] = (), ack_dscp: int | None = None
) -> str:
    """Replace the rules of the ``out`` and ``in`` chains for ``jobs`` (one transaction).

    ``made``: counter suffixes that exist already (their counters are kept, with their values);
    ``ack_dscp``: the DSCP of the jobs' pure ACKs (``None``: they keep their connection's).
    """
    jobs = list(jobs)
    have = set(made)
    lines = [f"flush chain inet {table} out", f"flush chain inet {table} in"]
    for j in jobs:
        if j.name not in have:
            lines += [f"add counter inet {table} {c}_{j.name}" for c in ("tx", "txd", "rxd", "held")]
    for j in jobs:
        match = f'socket cgroupv2 level {j.level} "{j.cgroup}" ct mark set {j.mark:#x}'
        lines.append(f"add rule inet {table} out {match}")
        lines.append(f"add rule inet {table} in {match}")
    for j in jobs:
        m = f"ct mark {j.mark:#x}"
        lines.append(f'add rule inet {table} out {m} oifname != "lo" counter name "tx_{j.name}"')
        lines.append(
            f'add rule inet {table} out {m} oifname != "lo" meta length > 100 counter name "txd_{j.name}"'
        )
    for j in jobs:  # data received: at the pace of the wire (sent data waits in queues first)
        lines.append(
            f'add rule inet {table} in ct mark {j.mark:#x} iifname != "lo" meta length > 100 '
            f'counter name "rxd_{j.name}"'
        )
    lines.append(f"add rule inet {table} out ct mark vmap @dscp")
    if ack_dscp is not None:  # after the class's DSCP: a pure ACK (no payload, no flag but ACK) is promoted
        for j in jobs:
            lines.append(
                f"add rule inet {table} out ct mark {j.mark:#x} meta l4proto tcp "
                f"tcp flags & (fin|syn|rst|psh|ack) == ack meta length < 100 ip dscp set {ack_dscp}"
            )
    for j in jobs:
        lines.append(
            f"add rule inet {table} out ct mark {j.mark:#x} ct mark @alive meta l4proto tcp ct state new "
            f'ip daddr @fabric ip saddr . ip daddr . tcp dport != @known counter name "held_{j.name}" drop'
        )
    return "\n".join(lines) + "\n"


def marks_script(table: str, dscp_of: Mapping[int, int]) -> str:
    """Set the DSCP of every job mark (one transaction: no packet sees a half-updated map)."""
    lines = [f"flush map inet {table} dscp"]
    if dscp_of:
        elems = ", ".join(f"{m:#x} : jump dscp_{d}" for m, d in sorted(dscp_of.items()))
        lines.append(f"add element inet {table} dscp {{ {elems} }}")
    return "\n".join(lines) + "\n"


def fabric_script(table: str, addresses: Iterable[str]) -> str:
    """The addresses whose new connections may be held until pinned."""
    ips = sorted(set(addresses))
    lines = [f"flush set inet {table} fabric"]
    if ips:
        lines.append(f"add element inet {table} fabric {{ {', '.join(ips)} }}")
    return "\n".join(lines) + "\n"


def alive_script(table: str, marks: Iterable[int], timeout_s: float) -> str:
    """Refresh the jobs whose SYNs may be held (each expires ``timeout_s`` after this)."""
    ms = sorted(set(marks))
    lines = [f"flush set inet {table} alive"]
    if ms:
        ms_timeout = max(1, round(timeout_s * 1000))
        elems = ", ".join(f"{m:#x} timeout {ms_timeout}ms" for m in ms)
        lines.append(f"add element inet {table} alive {{ {elems} }}")
    return "\n".join(lines) + "\n"


def pin_script(table: str, pin: Pin, chain: int, *, old_chain: int | None, known: bool) -> str:
    """Install ``pin`` (chain ``pin_<chain>``) in place of ``old_chain``; add its key to ``known``.

    With no ports the key is only marked as decided (its connections pass untranslated).
    """
    lines = []
    if old_chain is not None:
        lines.append(f"delete element inet {table} pins {{ {pin.key} }}")
    if pin.ports:
        lines.append(f"add chain inet {table} pin_{chain}")
        ports = ", ".join(f"{i} : {p}" for i, p in enumerate(pin.ports))
        lines.append(
            f"add rule inet {table} pin_{chain} meta l4proto tcp snat ip to {pin.src} : "
            f"numgen inc mod {len(pin.ports)} map {{ {ports} }}"
        )
        lines.append(f"add element inet {table} pins {{ {pin.key} : jump pin_{chain} }}")
    if old_chain is not None:
        lines.append(f"delete chain inet {table} pin_{old_chain}")
    if not known:
        lines.append(f"add element inet {table} known {{ {pin.src} . {pin.dst} . {pin.dport} }}")
    return "\n".join(lines) + "\n"


def forget_script(table: str, name: str, pins: Iterable[tuple[Pin, int | None]], known: Iterable[str]) -> str:
    """Remove what a forgotten job leaves once its rules are gone: its counters (suffix ``name``),
    its ``pins`` (each with its chain, ``None``: no ports were installed) and the ``known`` keys
    (``"SRC . DST . DPORT"``) no other job's pin uses. Call it after :func:`jobs_script` dropped
    the job's rules (a counter a rule names cannot be deleted).
    """
    lines = [f"delete counter inet {table} {c}_{name}" for c in ("tx", "txd", "rxd", "held")]
    for pin, chain in pins:
        if chain is not None:
            lines.append(f"delete element inet {table} pins {{ {pin.key} }}")
            lines.append(f"delete chain inet {table} pin_{chain}")
    lines += [f"delete element inet {table} known {{ {k} }}" for k in sorted(set(known))]
    return "\n".join(lines) + "\n"


def delete_table_script(table: str) -> str:
    return f"delete table inet {table}\n"


def nft_argv(netns: str | None = None) -> list[str]:
    """``nft -f -``, inside network namespace ``netns`` (a name under ``/run/netns``) when given.

    ``nsenter --net`` keeps the mount namespace, where the cgroup paths of the rules resolve.
    """
    nft = shutil.which("nft")
    if nft is None:
        raise CapabilityError(
            "transparent enforcement needs the 'nft' command (Debian package nftables)", where="enforce"
        )
    if netns is None:
        return [nft, "-f", "-"]
    return ["nsenter", f"--net={Path('/run/netns') / netns}", nft, "-f", "-"]


def run_nft(script: str, netns: str | None = None) -> None:
    """Apply ``script`` as one nftables transaction (all or nothing); a failure raises one line."""
    proc = subprocess.run(nft_argv(netns), input=script, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        lines = [x for x in proc.stderr.splitlines() if x.strip()]
        raise TestbedError(f"nft failed: {lines[0] if lines else '(no message)'}")
