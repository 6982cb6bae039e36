"""Marking: what the kernel does to a job's packets and what it counts of them.

* :mod:`.nft`: the nftables table of one agent (a job's mark and DSCP, its pinned source ports, the held
  SYNs), as text of atomic transactions, and the one call that applies them;
* :mod:`.nflink`: the table's named counters read over netlink (a job's traffic series);
* :mod:`.conns`: the host's TCP sockets and tracked connections, read from ``/proc``;
* :mod:`.nccl`: what NCCL (RoCE traffic the kernel never sees) is told: its traffic class and rails.

This room imports no other part of the enforcer (``tests/test_runtime_layout.py`` holds it).
"""
