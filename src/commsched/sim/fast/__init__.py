"""The fast mode's room: where a component's steady state is found and skipped over.

Where the fast mode decides to skip: at its anchor job's iteration starts
(:meth:`FastMode.on_iteration_start <commsched.sim.fast.mode.FastMode.on_iteration_start>`), which looks for
a period (:mod:`.steady`) and else a regime at measured rates (:mod:`.measured`), and after a decision for
the large components that run as fluids (:meth:`FluidMode.apply <commsched.sim.fast.fluid.FluidMode.apply>`).

* :mod:`.mode`: :class:`~commsched.sim.fast.mode.FastMode`, the periodic jumps and the catch-ups;
* :mod:`.measured`: regimes extrapolated at measured rates, each checked by the detail after it;
* :mod:`.steady`: steady states of a component (signatures, periods, measured rates);
* :mod:`.searches`: the searches of :mod:`.steady` over a component's history, compiled;
* :mod:`.jumps`: moving a component's state forward in time and crediting its counters;
* :mod:`.checks`: the fast mode's self-checks of every stretch it extrapolated;
* :mod:`.fluid`: :class:`~commsched.sim.fast.fluid.FluidMode`, large components at their analytic
  steady state.

The engine alone wires it; the rest of the simulator reaches it through :mod:`commsched.sim.jobs.hooks`.
"""
