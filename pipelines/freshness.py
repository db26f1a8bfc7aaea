"""What changed since the last build: raw-input fingerprints and code versions.

The source assets record a fingerprint of their raw files as their data version, and every asset
carries a code version. :func:`stale_asset_keys` compares both with the latest materialisations in
the Dagster instance, so the rebuild schedule and the raw-files sensor request only the assets whose
inputs or code changed, plus what lies downstream of them.
"""

from __future__ import annotations

from collections.abc import Sequence

import dagster as dg

from assets.resources import SourcesResource, StorageResource
from assets.tables import fingerprint_paths

CODE_VERSION_TAG = "dagster/code_version"
DATA_VERSION_TAG = "dagster/data_version"


def source_inputs(sources: SourcesResource, storage: StorageResource) -> dict[str, list]:
    """The raw paths each source asset reads (what its data version fingerprints)."""
    spatialab = sources.spatialab(storage)
    return {
        "mcq_questions": [sources.omnispatial(storage)]
        + ([spatialab.parent] if spatialab is not None else []),
        "scene_graphs": [sources.visual_genome(storage)],
        "rgbd_frames": [sources.scannet(storage)],
    }


def source_fingerprints(sources: SourcesResource, storage: StorageResource) -> dict[str, str]:
    """Current fingerprint of each source asset's raw inputs."""
    return {name: fingerprint_paths(paths) for name, paths in source_inputs(sources, storage).items()}


def _latest_tags(instance: dg.DagsterInstance, key: dg.AssetKey) -> dict[str, str] | None:
    event = instance.get_latest_materialization_event(key)
    if event is None or event.asset_materialization is None:
        return None
    return dict(event.asset_materialization.tags or {})


def stale_asset_keys(
    instance: dg.DagsterInstance, assets: Sequence[dg.AssetsDefinition], fingerprints: dict[str, str]
) -> set[dg.AssetKey]:
    """Assets never materialised, with a changed code version, or whose raw inputs changed, plus their downstream."""
    stale: set[dg.AssetKey] = set()
    for assets_def in assets:
        if assets_def.partitions_def is not None:
            continue
        for key, code_version in assets_def.code_versions_by_key.items():
            tags = _latest_tags(instance, key)
            if tags is None:
                stale.add(key)
                continue
            if code_version is not None and tags.get(CODE_VERSION_TAG) != code_version:
                stale.add(key)
            fingerprint = fingerprints.get(key.to_user_string())
            if fingerprint is not None and tags.get(DATA_VERSION_TAG) != fingerprint:
                stale.add(key)
    if not stale:
        return set()
    unpartitioned = [a for a in assets if a.partitions_def is None]
    return dg.AssetSelection.assets(*stale).downstream().resolve(unpartitioned)
