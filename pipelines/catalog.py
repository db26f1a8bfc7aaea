"""The catalog attributes of every asset: kinds, owners, the method and stage tags, freshness.

:func:`with_catalog` maps every asset spec (as :func:`pipelines.automation.with_rebuild_policy` does) and
is applied to every asset of the Definitions (the observable raw folders once they are declared with
asset specs: see :func:`with_catalog`). What the UI's catalog then shows, and filters by:

- **kinds**: ``parquet`` and ``polars`` on every table the Parquet IO manager writes (quarantines
  included), plus the engine of the op that builds it (:data:`EXTRA_KINDS`): ``open3d`` for the DGE
  geometry (``scene_geometry``, ``frame_visibility``) and the sample world, ``openai`` / ``anthropic``
  for the assets that call those LLMs with the default resources (phrases, SFT reasoning, STVQA
  generation by Claude, pass@2 by GPT-4o), ``pytorch`` for Grounding DINO (``pseudo_gt_boxes``) and
  the evaluated model (``eval_report``). The observable raw folders (:mod:`assets.raw_files`) carry
their own kind (``file``) and method and stage tags; they have no owners (an observable source
asset cannot have any).
- **owners**: ``$SPATIAL_ASSET_OWNERS`` (comma-separated, each ``team:name`` or an email), default
  ``team:spatial-data``; set here for every asset (an asset's own ``owners`` are replaced).
- **tags**: ``spatial/method`` (``spatialcore``, ``spatialthinker``, ``dge``, ``eval``, or ``shared``
  for the sample world) and ``spatial/stage`` (``raw``, ``source``, ``annotation``, ``audit``,
  ``training``, ``eval``); by the asset's group, with the exceptions named in :data:`METHOD_BY_ASSET`
  and :data:`STAGE_BY_ASSET`. A quarantine table takes the attributes of its table.
- **freshness**: no table is rebuilt on a clock. The raw folders are observed on the cron
  ``$SPATIAL_REBUILD_CRON``, but an observation that finds the same files rebuilds nothing, so a table
  of a data set that does not change would look stale. Where the raw data does change on a cadence,
  set ``$SPATIAL_SOURCE_FRESHNESS_DAYS=N``: the source tables (``mcq_questions``, ``scene_graphs``,
  ``rgbd_frames``, ``rgbd_scenes``) then carry ``dg.FreshnessPolicy.time_window(fail_window=N days)``
  (for the weekly default cron, 8 leaves a day for the rebuild). The Dagster daemon evaluates freshness
  when the instance's ``dagster.yaml`` has ``freshness: {enabled: true}``.
"""

from __future__ import annotations

import datetime
import os
from collections.abc import Sequence

import dagster as dg

OWNERS_ENV = "SPATIAL_ASSET_OWNERS"
DEFAULT_OWNERS = ("team:spatial-data",)
SOURCE_FRESHNESS_DAYS_ENV = "SPATIAL_SOURCE_FRESHNESS_DAYS"
METHOD_TAG = "spatial/method"
STAGE_TAG = "spatial/stage"
QUARANTINE_SUFFIX = "_quarantine"

TABLE_KINDS = frozenset({"parquet", "polars"})
"""The kinds of every table the Parquet IO manager writes."""
EXTRA_KINDS: dict[str, frozenset[str]] = {
    "sample_world": frozenset({"open3d"}),
    "scene_geometry": frozenset({"open3d"}),
    "frame_visibility": frozenset({"open3d"}),
    "object_phrases": frozenset({"openai"}),
    "sft_cold_start": frozenset({"openai"}),
    "stvqa_candidates": frozenset({"anthropic"}),
    "stvqa_validated": frozenset({"openai"}),
    "stvqa_pass_at_2_attempts": frozenset({"openai"}),
    "pseudo_gt_boxes": frozenset({"pytorch"}),
    "eval_report": frozenset({"pytorch"}),
}
"""Kinds beyond :data:`TABLE_KINDS`, by asset: the engine or API its op uses."""
NOT_TABLES = frozenset({"sample_world"})
"""Assets that are not Parquet tables (the rendered sample world)."""

METHOD_BY_GROUP = {"grounding": "spatialcore", "stvqa": "spatialthinker", "dge": "dge", "eval": "eval"}
STAGE_BY_GROUP = {
    "sources": "source",
    "grounding": "annotation",
    "stvqa": "annotation",
    "dge": "annotation",
    "eval": "eval",
}
METHOD_BY_ASSET = {
    "mcq_questions": "spatialcore",
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
SOURCE_TABLES = frozenset({"mcq_questions", "scene_graphs", "rgbd_frames", "rgbd_scenes"})
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
    kinds = set(EXTRA_KINDS.get(table, ())) | (set() if table in NOT_TABLES else set(TABLE_KINDS))
    return kinds, {METHOD_TAG: method, STAGE_TAG: stage}


def with_catalog(
    assets: Sequence[dg.AssetsDefinition | dg.SourceAsset],
) -> list[dg.AssetsDefinition | dg.SourceAsset]:
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
