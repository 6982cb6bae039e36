"""The event loop's room: the clock and the heap of pending events, and the compiled loop of exact mode.

* :mod:`.kernel`: :class:`~commsched.sim.loop.kernel.EventKernel`, the clock (set there only) and the
  heap, ordered by ``(time, kind, sequence)``; its rows for the compiled loop;
* :mod:`.flatloop`: the compiled loop, the flat events (compute end, release, step end) on arrays;
* :mod:`.compiled`: its Python side, the state copied onto the arrays and back around each stretch.

The loop itself, the one both modes run, is the engine's (:meth:`commsched.sim.engine.Simulation.run`).
"""
