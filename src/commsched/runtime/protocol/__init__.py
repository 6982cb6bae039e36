"""What crosses a process boundary on the control path: the records, their field reader, the mark.

* :mod:`.control` — the control path's documents (the daemon's :class:`~.control.Decision`, the
  :class:`~.control.HostView` an agent follows, the :class:`~.control.PortAnswer` a job reads), each
  with ``to_json()`` and a validating ``from_json()``;
* :mod:`.fields` — typed reading of one JSON object's fields, with errors that name the field;
* :mod:`.marks` — a priority class turned into the DSCP and TOS byte every packet carries, and set
  on a socket.

Every runtime part (daemon, agent, job library, parameter server, enforcement) speaks through these;
they import nothing of the runtime themselves. Nothing is imported here, so that each module is
imported only where it is used.
"""
