"""Tests of the grounding package (object phrases, pseudo-GT, SpatialCORE tables)."""
