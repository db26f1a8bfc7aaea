"""Materialize source assets as a build does: the unpartitioned ones in one run, the scan tables over
every scan folder (one ``scenes`` partition each) in one range run, on one instance."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import dagster as dg

from assets.partitions import SCENES_PARTITIONS_NAME
from assets.resources import WorkersResource
from pipelines.cli import partition_range_tags


def materialize_sources(
    assets: Sequence[dg.AssetsDefinition], resources: dict, scans_root: Path | None = None
) -> list[dg.ExecuteInProcessResult]:
    """One result per run made; the scan tables' run only when ``assets`` holds them (``scans_root``: the
    scan folders, default the configured sources')."""
    instance = dg.DagsterInstance.ephemeral()
    resources = {"workers": WorkersResource(max_workers=1), **resources}  # the scan tables' worker pool
    results = []
    unpartitioned = [asset for asset in assets if asset.partitions_def is None]
    if unpartitioned:
        results.append(
            dg.materialize(unpartitioned, resources=resources, instance=instance, raise_on_error=False)
        )
    per_scan = [asset for asset in assets if asset.partitions_def is not None]
    if per_scan:
        root = scans_root or resources["sources"].scannet(resources["storage"])
        scenes = sorted(path.name for path in Path(root).iterdir() if path.is_dir())
        instance.add_dynamic_partitions(SCENES_PARTITIONS_NAME, scenes)
        results.append(
            dg.materialize(
                per_scan,
                resources=resources,
                instance=instance,
                tags=partition_range_tags(scenes[0], scenes[-1]),
                raise_on_error=False,
            )
        )
    return results
