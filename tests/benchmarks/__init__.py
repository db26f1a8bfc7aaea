"""Smoke runs of the benchmark scripts at tiny sizes."""
