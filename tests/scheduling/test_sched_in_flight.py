"""The compression orders pairs that share a link only through a step still in flight.

A decision that moves a job leaves its step in flight on the old routes; the engine passes those
links (``ClusterState.in_flight_links``) and the contention DAG must count them, otherwise the
compression may order such a pair against the ranking while both still share a link
(docs/fig23-gaps.md, section (a)).
"""

from __future__ import annotations

import itertools
from dataclasses import replace

from commsched.scheduling.interfaces import PolicyContext
from commsched.scheduling.policies import communication_policies, contention_matrix
from commsched.scheduling.priority import job_facts, network_link_mask
from commsched.testing import check_compression, example_states


def test_in_flight_links_make_a_pair_contend_and_the_compression_keeps_its_order() -> None:
    state = example_states()[2]  # six jobs on three ToRs, two levels
    policy = communication_policies()["crux-full"]
    ctx = PolicyContext(seed=0, now_s=0.0, epoch=0)
    d = policy(state, ctx)
    topo = state.topology
    network = network_link_mask(topo)
    facts = [job_facts(topo, j, d.routes, network) for j in state.jobs]
    share = contention_matrix(topo, facts, network)
    pairs = [(a, b) for a, b in itertools.combinations(range(len(facts)), 2) if not share[a, b]]
    assert pairs, "the example needs a pair that the decided routes separate"
    for a, b in pairs:
        # job a's step is still in flight on links job b now uses
        moved = {facts[a].job.id: tuple(int(x) for x in facts[b].traffic.link_ids)}
        assert contention_matrix(topo, facts, network, moved)[a, b]
        assert not contention_matrix(topo, facts, network, {})[a, b]
        later = replace(state, in_flight_links=moved)
        assert check_compression(later, policy(later, ctx)) == []


def test_no_in_flight_links_change_nothing() -> None:
    ctx = PolicyContext(seed=0, now_s=0.0, epoch=0)
    for state in example_states():
        for name in ("crux-full", "crux-full-guard", "crux-ps-pa"):
            policy = communication_policies()[name]
            assert policy(state, ctx) == policy(replace(state, in_flight_links={}), ctx)
