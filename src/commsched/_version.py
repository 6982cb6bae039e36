"""The version of commsched (one place: the package root, the CLI and result files read it here)."""

__version__ = "0.1.0"
