"""The emulated fabric testbed: a commsched topology as Linux namespaces, veth links and HTB queues."""
