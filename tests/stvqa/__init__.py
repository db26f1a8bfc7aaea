"""Tests of the STVQA assets: generation, ground truth, pass@2, the data set."""
