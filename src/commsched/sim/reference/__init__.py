"""The references the engine is held to (tests and benchmarks use them; a run never does).

* :mod:`.maxmin`: the reference rate allocation (strict priority between classes, max-min fair within
  one), which the compiled water-filling (:mod:`commsched.sim.rates.flowfill`) reproduces bit for bit;
* :mod:`.validation`: the chunk-by-chunk ring all-reduce the coupling rule is validated against.
"""
