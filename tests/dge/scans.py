"""The sample world's scans read as the sources asset reads them: every frame and scene row marked 'sample_world'."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import dagster as dg
import polars as pl

from assets.partitions import scenes_partitions
from assets.sources.assets import with_origin
from data_contracts.origin import SAMPLE_WORLD
from data_contracts.storage import table_path, write_table
from readers.scannet import ScanNetTables, read_scannet


def read_sample_scans(scans_root: str | Path) -> ScanNetTables:
    """``read_scannet`` of a sample-world ``scannet/scans`` folder, with ``origin`` set as ``rgbd_frames`` has it."""
    tables = read_scannet(scans_root)
    return dataclasses.replace(
        tables,
        frames=with_origin(tables.frames, SAMPLE_WORLD),
        scenes=with_origin(tables.scenes, SAMPLE_WORLD),
    )


SCAN_TABLE_SOURCES = [
    dg.AssetSpec("rgbd_frames", partitions_def=scenes_partitions),
    dg.AssetSpec("rgbd_scenes", partitions_def=scenes_partitions),
]
"""The scan tables as the DGE assets read them (one file per scan), for a test that writes them itself."""


def write_scan_tables(frames: pl.DataFrame, scenes: pl.DataFrame, root: Path) -> None:
    """Write ``rgbd_frames`` and ``rgbd_scenes`` under ``root`` as the ``rgbd`` asset does: one file per scan."""
    for table, frame in (("rgbd_frames", frames), ("rgbd_scenes", scenes)):
        for scene_id in scenes["scene_id"].to_list():
            write_table(frame.filter(pl.col("scene_id") == scene_id), table_path(root, table, scene_id))
