"""Tests of the PS experiments (commsched.experiments.ps)."""
