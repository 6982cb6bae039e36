"""Experiments at the edge: scripted comparisons that produce figures (simulator and/or testbed).

Each experiment is a module with a typed entry point that the CLI (or ``python -m``) calls: the
microbenchmark, the vClos evaluation, hash collisions, the testbed run beside its simulated twin, the
PS benches (:mod:`commsched.experiments.ps`) and the analyses of the Crux figures. Comparing policies
is the API's job (:func:`commsched.api.compare`, records in :mod:`commsched.sim.results.comparison`); this
package holds no core API and exports no names of its own.
"""

__all__: list[str] = []
