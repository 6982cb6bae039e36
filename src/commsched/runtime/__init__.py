"""Real hosts: the pieces that enforce commsched decisions (daemon, agent, transport, profiler)."""
