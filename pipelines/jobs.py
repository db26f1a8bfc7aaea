"""Jobs: one per method, one for the sources, and one for every unpartitioned dataset.

Partitioned assets (the DGE geometry, one partition per scan) cannot share a run with
unpartitioned ones, so ``datasets_job`` holds every unpartitioned asset and ``dge_job`` the
per-scan ones; ``spatial-build`` runs both in order (see :mod:`pipelines.cli`).
"""

import dagster as dg

SOURCES_GROUP = "sources"
GROUNDING_GROUP = "grounding"
STVQA_GROUP = "stvqa"
DGE_GROUP = "dge"


def build_jobs(all_assets) -> list:
    """The jobs over ``all_assets``."""
    partitioned = [key for a in all_assets if a.partitions_def is not None for key in a.keys]
    unpartitioned = dg.AssetSelection.all() - dg.AssetSelection.assets(*partitioned)
    groups = {group for a in all_assets for group in a.group_names_by_key.values()}
    jobs = [
        dg.define_asset_job(
            "sources_job",
            selection=dg.AssetSelection.groups(SOURCES_GROUP),
            description="Ingest every raw source (and the sample world) into checked Parquet tables.",
        ),
        dg.define_asset_job(
            "datasets_job",
            selection=unpartitioned,
            description="Every unpartitioned dataset (sources, grounding, STVQA, training and eval tables).",
        ),
    ]
    if GROUNDING_GROUP in groups:
        jobs.append(
            dg.define_asset_job(
                "spatialcore_job",
                selection=dg.AssetSelection.groups(GROUNDING_GROUP).upstream() & unpartitioned,
                description="SpatialCORE: object phrases, Grounding DINO pseudo-GT and the training table.",
            )
        )
    if STVQA_GROUP in groups:
        jobs.append(
            dg.define_asset_job(
                "stvqa_job",
                selection=dg.AssetSelection.groups(STVQA_GROUP).upstream() & unpartitioned,
                description="SpatialThinker: STVQA generation, pass@2 validation and the data set.",
            )
        )
    if partitioned:
        jobs.append(
            dg.define_asset_job(
                "dge_job",
                selection=dg.AssetSelection.assets(*partitioned),
                description="SpatialEvo DGE: per-scan geometry, visibility and exact tasks (one partition per scan).",
            )
        )
    return jobs
