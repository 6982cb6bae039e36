"""commsched.cli."""
