"""commsched.intrajob."""
