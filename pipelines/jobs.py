"""Jobs: one per method, one for the sources, and the main job that builds everything unpartitioned.

Partitioned assets (the DGE geometry, one partition per scan) cannot share a run with
unpartitioned ones, so the main build (``spatial-build``) runs the phases of :data:`BUILD_PHASES`
in order: the unpartitioned graph upstream of the scans' geometry, every scene partition, then
what reads the geometry.
"""

import dagster as dg

SOURCES_GROUP = "sources"

sources_job = dg.define_asset_job(
    "sources_job",
    selection=dg.AssetSelection.groups(SOURCES_GROUP),
    description="Ingest every raw source (and the sample world) into checked Parquet tables.",
)
