"""Test-suite settings shared by every folder."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, settings

# CI machines are shared and noisy: no per-example deadline (performance lives in benchmarks/), and
# no health check on slow data generation. Example counts stay as each test sets them.
settings.register_profile("commsched", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("commsched")


#: test modules (or folders) that run jobs on the testbed or time traffic on shaped links and paced
#: sockets: they carry the marker ``network``, and ``make test`` runs them in a stage of their own, one
#: after another with nothing else of the suite running, so that no two of them share the machine's links,
#: timers and cores (their twins and log gaps are bounds measured on a machine they have to themselves)
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


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if item.nodeid.startswith(NETWORK):  # relative to the root folder (also where it is a link)
            item.add_marker(pytest.mark.network)
