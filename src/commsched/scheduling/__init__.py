"""commsched.scheduling."""
