"""Jobs: one per method, one for the sources, one for every unpartitioned dataset, one per partitioning.

A run cannot mix partitions definitions, so every set of assets that shares one gets its own job:
``dge_job`` (one partition per RGB-D scan), ``grounding_shards_job`` (Grounding DINO shards) and
``stvqa_shards_job`` (STVQA generation and pass@2 shards). ``datasets_job`` holds every
unpartitioned asset; ``spatial-build`` runs all of them in dependency order (see
:mod:`pipelines.cli`).
"""

import dagster as dg

SOURCES_GROUP = "sources"
GROUNDING_GROUP = "grounding"
STVQA_GROUP = "stvqa"
DGE_GROUP = "dge"


def partitioned_job_name(assets_def: dg.AssetsDefinition) -> str:
    """Name of the job that runs a partitioned asset: ``dge_job`` for scans, ``<group>_shards_job`` otherwise."""
    group = next(iter(assets_def.group_names_by_key.values()))
    return "dge_job" if group == DGE_GROUP else f"{group}_shards_job"


def build_jobs(all_assets) -> list:
    """The jobs over ``all_assets``."""
    partitioned_keys = [key for a in all_assets if a.partitions_def is not None for key in a.keys]
    unpartitioned = dg.AssetSelection.all() - dg.AssetSelection.assets(*partitioned_keys)
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
            description="Every unpartitioned dataset (sources, phrases, training and eval tables).",
        ),
    ]
    method_jobs = {
        GROUNDING_GROUP: (
            "spatialcore_job",
            "SpatialCORE: object phrases and the tables built on the pseudo-GT shards.",
        ),
        STVQA_GROUP: ("stvqa_job", "SpatialThinker: the STVQA data set from the validated shards."),
    }
    for group, (name, description) in method_jobs.items():
        if group in groups:
            selection = (
                dg.AssetSelection.groups(group).upstream() & unpartitioned
            ).required_multi_asset_neighbors()
            jobs.append(dg.define_asset_job(name, selection=selection, description=description))
    by_job: dict[str, list] = {}
    for assets_def in all_assets:
        if assets_def.partitions_def is not None:
            by_job.setdefault(partitioned_job_name(assets_def), []).extend(assets_def.keys)
    for name, keys in sorted(by_job.items()):
        jobs.append(
            dg.define_asset_job(
                name, selection=dg.AssetSelection.assets(*keys), description=f"Partitioned assets: {name}."
            )
        )
    return jobs
