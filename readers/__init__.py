"""Readers for the raw input formats, free of Dagster: used by the source assets and by ``spatial-eval``.

- :mod:`readers.common`: the missing-input error, image and JSON helpers;
- :mod:`readers.mcq`: OmniSpatial and SpatiaLab multiple-choice questions;
- :mod:`readers.scene_graphs`: Visual Genome (raw JSON, VG150 h5, prompt-style Parquet);
- :mod:`readers.scannet`: ScanNet-style RGB-D scans.
"""
