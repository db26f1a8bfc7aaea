"""Tests of the evaluation harness (training/eval, assets/eval)."""
