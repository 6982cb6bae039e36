"""The shaped namespace link (root only): goodput near the rate, rate changes apply, no leftovers."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from commsched.errors import CapabilityError
from commsched.experiments.ps.bench import measure_goodput
from commsched.testbed.fabric import shaped_link
from commsched.testbed.netns import require_capability

needs_root = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("tc") is None, reason="needs root and iproute2 (namespaces, tc)"
)


def _netns() -> str:
    return subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=False).stdout


@pytest.mark.skipif(os.geteuid() == 0, reason="checks the error a non-root user gets")
def test_without_root_a_clear_error() -> None:
    with pytest.raises(CapabilityError, match="needs root"):
        require_capability()


@needs_root
@pytest.mark.slow
def test_shaped_goodput_and_rate_change() -> None:
    with shaped_link(200e6) as link:
        assert link.server_ns in _netns()
        g1 = measure_goodput(link, flows=1, duration_s=1.0)
        link.set_rate(50e6)
        g2 = measure_goodput(link, flows=1, duration_s=1.0)
    # TCP/IP headers: goodput ~ 1448/1514 of the rate; the shared box adds noise
    assert 0.8 * 200e6 < g1 < 1.0 * 200e6
    assert 0.8 * 50e6 < g2 < 1.0 * 50e6
    assert link.server_ns not in _netns() and link.worker_ns not in _netns()


@needs_root
def test_cleanup_after_a_failure_halfway() -> None:
    with pytest.raises(RuntimeError, match="boom"), shaped_link(100e6) as link:
        name = link.worker_ns
        raise RuntimeError("boom")
    assert name not in _netns()


@needs_root
@pytest.mark.slow
def test_each_worker_has_its_own_address_and_leaf() -> None:
    with shaped_link(100e6, workers=2, prefix="cst") as link:
        assert link.worker_ips == ("10.213.0.2", "10.213.0.3")
        for ns, dev in ((link.server_ns, link.server_dev), (link.worker_ns, link.worker_dev)):
            classes = subprocess.run(link.argv(ns, ["tc", "class", "show", "dev", dev]),
                                     capture_output=True, text=True, check=True).stdout  # fmt: skip
            assert "1:10" in classes and "1:11" in classes
            filters = subprocess.run(link.argv(ns, ["tc", "filter", "show", "dev", dev]),
                                     capture_output=True, text=True, check=True).stdout  # fmt: skip
            assert "flowid 1:10" in filters and "flowid 1:11" in filters
        # one flow per worker address, both directions at once: each direction still delivers the
        # rate less TCP/IP headers (the leaves borrow up to it), not one worker's share of it
        g = measure_goodput(link, flows=2, duration_s=1.0, both_ways=True)
        link.set_rate(50e6)
        g2 = measure_goodput(link, flows=2, duration_s=1.0)
    assert 0.8 * 100e6 < g < 1.0 * 100e6
    assert 0.8 * 50e6 < g2 < 1.0 * 50e6
    assert link.server_ns not in _netns()
