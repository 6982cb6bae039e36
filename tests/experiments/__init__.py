"""Tests of commsched.experiments."""
