"""Test-suite settings shared by every folder."""

from __future__ import annotations

from hypothesis import HealthCheck, settings

# CI machines are shared and noisy: no per-example deadline (performance lives in benchmarks/), and
# no health check on slow data generation. Example counts stay as each test sets them.
settings.register_profile("commsched", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("commsched")
