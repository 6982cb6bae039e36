"""Test-suite settings shared by every folder."""

from __future__ import annotations

import contextlib
import os

import pytest
from hypothesis import HealthCheck, settings

# CI machines are shared and noisy: no per-example deadline (performance lives in benchmarks/), and
# no health check on slow data generation. Example counts stay as each test sets them.
settings.register_profile("commsched", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("commsched")


#: test modules (or folders) that run jobs on the testbed or time traffic on shaped links and paced
#: sockets: under ``pytest -n`` (``make test``) they go to one worker as one group (``--dist
#: loadgroup``), one after another, so that no two of them share the machine's links and timers
NETWORK = (
    "tests/experiments/ps/",
    "tests/real_jobs/test_enforce_root.py",
    "tests/real_jobs/test_probe_root.py",
    "tests/real_jobs/test_real_run.py",
    "tests/real_jobs/test_teardown_root.py",
    "tests/real_jobs/test_traffic_profiles_root.py",
    "tests/runtime_ps/test_pacing.py",
    "tests/runtime_transport/test_marking.py",
    "tests/runtime_daemon/test_prometheus_root.py",
    "tests/slurm/test_slurm_root.py",
    "tests/testbed/",
    "tests/testbed_run/test_run_root.py",
)


#: the niceness of the other tests while a worker runs beside the network group (``pytest -n``): the
#: testbed's jobs, agents and daemon keep the CPU they need (their twins and log gaps are bounds measured
#: on a machine they have to themselves), the rest of the suite takes what is left
NICE_BESIDE = 10
#: the worker's own niceness, as it started
BASE_NICE = os.getpriority(os.PRIO_PROCESS, 0)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if item.nodeid.startswith(NETWORK):  # relative to the root folder (also where it is a link)
            item.add_marker(pytest.mark.xdist_group("network"))


def pytest_runtest_setup(item: pytest.Item) -> None:
    """Under ``pytest -n``: a network test (and what it starts) at the worker's own priority, any other
    at :data:`NICE_BESIDE` (as root, which may raise a priority again; elsewhere the priority stays)."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return
    want = BASE_NICE if item.nodeid.startswith(NETWORK) else BASE_NICE + NICE_BESIDE
    with contextlib.suppress(OSError):  # raising a priority again needs CAP_SYS_NICE
        os.setpriority(os.PRIO_PROCESS, 0, want)
