"""Tests of the reward library (training/rewards)."""
