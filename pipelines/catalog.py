"""The catalog attributes of every asset (``pipelines/README.md``, "Operator signals"): kinds, owners, the
``spatial/method`` and ``spatial/stage`` tags, and the source tables' freshness policy, set by
:func:`with_catalog` on every asset spec of the Definitions. A quarantine table takes the attributes of its
table.
"""

from __future__ import annotations

import datetime
import os
from collections.abc import Sequence
from typing import TypeVar

import dagster as dg

OWNERS_ENV = "SPATIAL_ASSET_OWNERS"
DEFAULT_OWNERS = ("team:spatial-data",)
SOURCE_FRESHNESS_DAYS_ENV = "SPATIAL_SOURCE_FRESHNESS_DAYS"
METHOD_TAG = "spatial/method"
STAGE_TAG = "spatial/stage"
QUARANTINE_SUFFIX = "_quarantine"

TABLE_KINDS = frozenset({"parquet", "polars"})
"""The kinds of every table the Parquet IO manager writes."""
EXTRA_KINDS = {
    "sample_world": "open3d",
    "scene_geometry": "open3d",
    "frame_visibility": "open3d",
    "object_phrases": "openai",
    "sft_cold_start": "openai",
    "stvqa_candidates": "anthropic",
    "stvqa_validated": "openai",
    "stvqa_pass_at_2_attempts": "openai",
    "pseudo_gt_boxes": "pytorch",
    "eval_report": "pytorch",
    "hub_dataset": "huggingface",
}
"""The kind beyond :data:`TABLE_KINDS`, by asset: the engine or API its op uses."""
NOT_TABLES = frozenset({"sample_world", "hub_dataset"})
"""Assets that are not Parquet tables (the rendered sample world, the published Hub repo)."""

METHOD_BY_GROUP = {
    "grounding": "spatialcore",
    "stvqa": "spatialthinker",
    "dge": "dge",
    "eval": "eval",
    "sharing": "shared",
}
STAGE_BY_GROUP = {
    "sources": "source",
    "grounding": "annotation",
    "stvqa": "annotation",
    "dge": "annotation",
    "eval": "eval",
    "sharing": "sharing",
}
METHOD_BY_ASSET = {
    "mcq_questions": "spatialcore",
    "mcq_images": "spatialcore",
    "scene_graphs": "spatialthinker",
    "rgbd_frames": "dge",
    "rgbd_scenes": "dge",
    "sample_world": "shared",
}
"""The method of each asset of the ``sources`` group: the one whose tables read it."""
STAGE_BY_ASSET = {
    "sample_world": "raw",
    "pseudo_gt_audit": "audit",
    "pseudo_gt_audit_precision": "audit",
    "spatialcore_train": "training",
    "spatialcore_train_corrupted": "training",
    "sft_cold_start": "training",
    "stvqa": "training",
    "dge_tasks": "training",
    "dge_image_tasks": "training",
}
"""Stages that differ from the group's (:data:`STAGE_BY_GROUP`)."""
SOURCE_TABLES = frozenset({"mcq_questions", "mcq_images", "scene_graphs", "rgbd_frames", "rgbd_scenes"})
"""The tables built straight from the raw folders: the ones a source freshness policy applies to."""


def asset_owners() -> list[str]:
    """``$SPATIAL_ASSET_OWNERS`` as a list, else :data:`DEFAULT_OWNERS`.

    Raises:
        ValueError: an owner that is neither ``team:name`` nor an email address.
    """
    owners = [owner.strip() for owner in os.environ.get(OWNERS_ENV, "").split(",") if owner.strip()]
    for owner in owners:
        if not (owner.startswith("team:") and len(owner) > 5) and "@" not in owner:
            raise ValueError(f"${OWNERS_ENV}: owner {owner!r} is neither 'team:<name>' nor an email address")
    return owners or list(DEFAULT_OWNERS)


def source_freshness_policy() -> dg.FreshnessPolicy | None:
    """The freshness policy of the source tables: rebuilt at least every ``$SPATIAL_SOURCE_FRESHNESS_DAYS``
    days; ``None`` (no policy) when that is unset.

    Raises:
        ValueError: a value that is not a positive number of days.
    """
    value = os.environ.get(SOURCE_FRESHNESS_DAYS_ENV, "").strip()
    if not value:
        return None
    try:
        days = float(value)
    except ValueError:
        days = 0.0
    if days <= 0:
        raise ValueError(f"${SOURCE_FRESHNESS_DAYS_ENV} is {value!r}: give a positive number of days")
    return dg.FreshnessPolicy.time_window(fail_window=datetime.timedelta(days=days))


def _attributes(name: str, group: str | None) -> tuple[set[str], dict[str, str]]:
    """The kinds and tags of the asset ``name`` in ``group``."""
    table = name.removesuffix(QUARANTINE_SUFFIX)
    method = METHOD_BY_ASSET.get(table, METHOD_BY_GROUP.get(group or ""))
    stage = STAGE_BY_ASSET.get(table, STAGE_BY_GROUP.get(group or ""))
    if method is None or stage is None:
        raise ValueError(
            f"asset {name} (group {group}) has no method or stage in pipelines/catalog.py: add its group to "
            "METHOD_BY_GROUP and STAGE_BY_GROUP, or the asset to METHOD_BY_ASSET / STAGE_BY_ASSET"
        )
    kinds = set() if table in NOT_TABLES else set(TABLE_KINDS)
    if table in EXTRA_KINDS:
        kinds.add(EXTRA_KINDS[table])
    return kinds, {METHOD_TAG: method, STAGE_TAG: stage}


_Assets = TypeVar("_Assets", dg.AssetsDefinition, dg.AssetsDefinition | dg.SourceAsset)
"""Asset definitions, or those mixed with source assets: what :func:`with_catalog` returns is what it takes."""


def with_catalog(assets: Sequence[_Assets]) -> list[_Assets]:
    """``assets`` with kinds, owners, the method and stage tags and, for the source tables, the freshness
    policy of ``$SPATIAL_SOURCE_FRESHNESS_DAYS`` on every asset spec (see the module docstring).

    A ``SourceAsset`` (what ``@dg.observable_source_asset`` makes) has no asset spec to map, no owners and
    no kinds: it is returned as it is. Observables declared with ``dg.AssetSpec``
    (``@dg.multi_observable_source_asset``) get their attributes like any other asset.
    """
    owners = asset_owners()
    freshness = source_freshness_policy()

    def attach(spec: dg.AssetSpec) -> dg.AssetSpec:
        name = spec.key.to_user_string()
        kinds, tags = _attributes(name, spec.group_name)
        spec = spec.merge_attributes(kinds=kinds, tags=tags).replace_attributes(owners=owners)
        if freshness is not None and name in SOURCE_TABLES:
            spec = spec.replace_attributes(freshness_policy=freshness)
        return spec

    return [
        asset if isinstance(asset, dg.SourceAsset) else dg.map_asset_specs(attach, [asset])[0]
        for asset in assets
    ]
