"""Tests of the data contracts."""
