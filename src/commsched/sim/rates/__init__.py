"""The rates' room: where a component's rates are solved, the one place (``docs/simulator.md``).

A step that starts or ends goes :meth:`Pacing.begin` / ``end_step``
(:class:`~commsched.sim.rates.pacing.Pacing`) -> :func:`~commsched.sim.rates.flowkernel.step_change` (the
pace cache, lazy settling) -> :func:`~commsched.sim.rates.flowfill.solve` (the water-filling: strict
priority between classes, max-min fair within one).

* :mod:`.pacing`: the paces of the steps in flight, component by component;
* :mod:`.flowkernel`, :mod:`.flowfill`: the compiled core, on the arrays laid out in :mod:`.flowlayout`;
* :mod:`.trafficpool`: every transfer schedule in use, copied once into the pool the kernel reads;
* :mod:`.binding`: which entries of each step row a component's solve reads (the links that can bind);
* :mod:`.components`: the components of contending jobs as the pacing holds them.

The reference solver the compiled one is held to is :mod:`commsched.sim.reference.maxmin`.
"""
