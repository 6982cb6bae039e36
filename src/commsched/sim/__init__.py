"""commsched.sim."""
