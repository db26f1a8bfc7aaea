"""Tests of the sample world generator."""
