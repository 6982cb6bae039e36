"""commsched.io."""
