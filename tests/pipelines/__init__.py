"""Tests of the Dagster wiring."""
