"""Tests of the source readers and assets."""
