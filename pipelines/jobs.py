"""Jobs: one for the sources, one for every unpartitioned dataset, one per method, one per partitioning.

A run cannot mix partitions definitions, so every set of assets that shares one gets its own job:
``dge_job`` (the scan tables and the DGE, one partition per RGB-D scan), ``grounding_shards_job`` (Grounding DINO shards) and
``stvqa_shards_job`` (STVQA generation and pass@2 shards). ``datasets_job`` holds every
unpartitioned asset of the graph; ``publish_job`` the opt-in publishing asset alone. ``spatial-build`` launches these named jobs (see :mod:`pipelines.cli`), so
every run it makes is listed under its job in the UI.
"""

from __future__ import annotations

from collections.abc import Sequence

import dagster as dg

from assets.partitions import grounding_shard_partitions, scenes_partitions, stvqa_shard_partitions

SOURCES_JOB = "sources_job"
DATASETS_JOB = "datasets_job"
SPATIALCORE_JOB = "spatialcore_job"
STVQA_JOB = "stvqa_job"
DGE_JOB = "dge_job"
GROUNDING_SHARDS_JOB = "grounding_shards_job"
STVQA_SHARDS_JOB = "stvqa_shards_job"
PUBLISH_JOB = "publish_job"

SOURCES_GROUP = "sources"
GROUNDING_GROUP = "grounding"
STVQA_GROUP = "stvqa"

JOB_BY_PARTITIONS = {
    scenes_partitions: DGE_JOB,
    grounding_shard_partitions: GROUNDING_SHARDS_JOB,
    stvqa_shard_partitions: STVQA_SHARDS_JOB,
}
"""The job that runs the assets of each partitions definition."""

_METHOD_JOBS = {
    GROUNDING_GROUP: (
        SPATIALCORE_JOB,
        "SpatialCORE: object phrases and the tables built on the pseudo-GT shards.",
    ),
    STVQA_GROUP: (STVQA_JOB, "SpatialThinker: the STVQA data set from the validated shards."),
}


def job_for(assets_def: dg.AssetsDefinition) -> str:
    """Name of the job that builds ``assets_def``."""
    if assets_def.partitions_def is None:
        return DATASETS_JOB
    return JOB_BY_PARTITIONS[assets_def.partitions_def]


def build_jobs(all_assets: Sequence[dg.AssetsDefinition]) -> list[dg.UnresolvedAssetJobDefinition]:
    """The jobs over ``all_assets``."""
    materializable = [a for a in all_assets if a.is_materializable]
    partitioned_keys = [key for a in materializable if a.partitions_def is not None for key in a.keys]
    unpartitioned = dg.AssetSelection.assets(
        *[key for a in materializable if a.partitions_def is None for key in a.keys]
    )
    groups = {group for a in materializable for group in a.group_names_by_key.values()}
    jobs = [
        dg.define_asset_job(
            SOURCES_JOB,
            selection=dg.AssetSelection.groups(SOURCES_GROUP) - dg.AssetSelection.assets(*partitioned_keys),
            description="Ingest every raw source (and the sample world) into checked Parquet tables.",
        ),
        dg.define_asset_job(
            DATASETS_JOB,
            selection=unpartitioned,
            description="Every unpartitioned dataset (sources, phrases, training and eval tables).",
        ),
    ]
    for group, (name, description) in _METHOD_JOBS.items():
        if group in groups:
            selection = (
                dg.AssetSelection.groups(group).upstream() & unpartitioned
            ).required_multi_asset_neighbors()
            jobs.append(dg.define_asset_job(name, selection=selection, description=description))
    keys_by_job: dict[str, list[dg.AssetKey]] = {}
    for assets_def in materializable:
        if assets_def.partitions_def is not None:
            keys_by_job.setdefault(job_for(assets_def), []).extend(assets_def.keys)
    for name, keys in sorted(keys_by_job.items()):
        jobs.append(
            dg.define_asset_job(
                name, selection=dg.AssetSelection.assets(*keys), description=f"Partitioned assets: {name}."
            )
        )
    return jobs


def build_publish_job(sharing_assets: Sequence[dg.AssetsDefinition]) -> dg.UnresolvedAssetJobDefinition:
    """``publish_job``: the opt-in publishing asset alone (its tables must be built; configure it in the launchpad)."""
    return dg.define_asset_job(
        PUBLISH_JOB,
        selection=dg.AssetSelection.assets(*[key for a in sharing_assets for key in a.keys]),
        description="Publish built tables to a Hugging Face Hub dataset repo (hub_dataset; opt-in).",
    )
