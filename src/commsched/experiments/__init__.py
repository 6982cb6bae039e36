"""commsched.experiments."""
