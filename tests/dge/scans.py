"""The sample world's scans read as the sources asset reads them: every frame and scene row marked 'sample_world'."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from assets.sources.assets import with_origin
from data_contracts.origin import SAMPLE_WORLD
from readers.scannet import ScanNetTables, read_scannet


def read_sample_scans(scans_root: str | Path) -> ScanNetTables:
    """``read_scannet`` of a sample-world ``scannet/scans`` folder, with ``origin`` set as ``rgbd_frames`` has it."""
    tables = read_scannet(scans_root)
    return dataclasses.replace(
        tables,
        frames=with_origin(tables.frames, SAMPLE_WORLD),
        scenes=with_origin(tables.scenes, SAMPLE_WORLD),
    )
