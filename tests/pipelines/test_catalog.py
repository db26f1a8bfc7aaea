"""The catalog attributes (``pipelines.catalog``): every asset of the Definitions has kinds, owners and the
method and stage tags, the kinds name the engine that builds each table, and the owners and the source
freshness policy follow their environment variables."""

import datetime

import dagster as dg
import pytest

from assets.raw_files import RAW_FILE_ASSETS
from pipelines.catalog import (
    METHOD_TAG,
    OWNERS_ENV,
    SOURCE_FRESHNESS_DAYS_ENV,
    STAGE_TAG,
    with_catalog,
)
from pipelines.definitions import ALL_ASSETS, defs

METHODS = {"spatialcore", "spatialthinker", "dge", "eval", "shared"}
STAGES = {"raw", "source", "annotation", "audit", "training", "eval", "sharing"}
SOURCE_ASSET_KEYS = {asset.key for asset in RAW_FILE_ASSETS if isinstance(asset, dg.SourceAsset)}
"""Observables declared as ``SourceAsset`` (``@dg.observable_source_asset``): they have no spec to carry owners or
kinds, so they are left as they are (the catalog covers them once they are declared with asset specs)."""


def _specs() -> dict[str, dg.AssetSpec]:
    return {spec.key.to_user_string(): spec for spec in defs.resolve_all_asset_specs()}


def test_every_asset_has_kinds_owners_and_the_method_and_stage_tags():
    specs = _specs()
    assert len(specs) >= 40
    for name, spec in specs.items():
        assert spec.tags.get(METHOD_TAG) in METHODS, name
        assert spec.tags.get(STAGE_TAG) in STAGES, name
        if spec.key in SOURCE_ASSET_KEYS:  # an observable source asset: its kind as a tag, no owners
            assert "dagster/kind/file" in spec.tags, name
            continue
        assert spec.kinds, name
        assert list(spec.owners) == ["team:spatial-data"], name
    assert all(key.to_user_string().startswith("raw_") for key in SOURCE_ASSET_KEYS)


@pytest.mark.parametrize(
    ("asset", "kinds", "method", "stage"),
    [
        ("scene_geometry", {"parquet", "polars", "open3d"}, "dge", "annotation"),  # fused with open3d
        ("frame_visibility", {"parquet", "polars", "open3d"}, "dge", "annotation"),  # open3d ray casting
        ("dge_tasks", {"parquet", "polars"}, "dge", "training"),
        ("rgbd_frames", {"parquet", "polars"}, "dge", "source"),  # the sources group, read by the DGE
        ("object_phrases", {"parquet", "polars", "openai"}, "spatialcore", "annotation"),  # GPT-4o-mini
        ("pseudo_gt_boxes", {"parquet", "polars", "pytorch"}, "spatialcore", "annotation"),  # Grounding DINO
        ("pseudo_gt_audit", {"parquet", "polars"}, "spatialcore", "audit"),
        ("sft_cold_start", {"parquet", "polars", "openai"}, "spatialcore", "training"),
        ("stvqa_candidates", {"parquet", "polars", "anthropic"}, "spatialthinker", "annotation"),  # Claude
        (
            "stvqa_validated",
            {"parquet", "polars", "openai"},
            "spatialthinker",
            "annotation",
        ),  # pass@2, GPT-4o
        ("stvqa", {"parquet", "polars"}, "spatialthinker", "training"),
        ("scene_graphs", {"parquet", "polars"}, "spatialthinker", "source"),
        ("mcq_questions_quarantine", {"parquet", "polars"}, "spatialcore", "source"),  # as its table
        ("eval_report", {"parquet", "polars", "pytorch"}, "eval", "eval"),
        ("sample_world", {"open3d"}, "shared", "raw"),  # rendered with open3d, not a table
        ("hub_dataset", {"huggingface"}, "shared", "sharing"),  # a Hub dataset repo, not a table
    ],
)
def test_kinds_and_tags_match_what_builds_the_asset(asset, kinds, method, stage):
    spec = _specs()[asset]
    assert spec.kinds == kinds
    assert (spec.tags[METHOD_TAG], spec.tags[STAGE_TAG]) == (method, stage)


def test_owners_and_source_freshness_follow_the_environment(monkeypatch):
    monkeypatch.setenv(OWNERS_ENV, "team:vision, ana@lab.org")
    monkeypatch.setenv(SOURCE_FRESHNESS_DAYS_ENV, "8")
    specs = {spec.key.to_user_string(): spec for a in with_catalog(ALL_ASSETS) for spec in a.specs}
    assert list(specs["stvqa"].owners) == ["team:vision", "ana@lab.org"]
    fresh = {name for name, spec in specs.items() if spec.freshness_policy is not None}
    assert fresh == {"mcq_questions", "mcq_images", "scene_graphs", "rgbd_frames", "rgbd_scenes"}
    assert specs["mcq_questions"].freshness_policy == dg.FreshnessPolicy.time_window(
        fail_window=datetime.timedelta(days=8)
    )
    monkeypatch.delenv(SOURCE_FRESHNESS_DAYS_ENV)  # the default: no table has a clock cadence
    assert not any(spec.freshness_policy for a in with_catalog(ALL_ASSETS) for spec in a.specs)


@pytest.mark.parametrize(
    ("variable", "value", "message"),
    [
        (OWNERS_ENV, "vision", "neither 'team:<name>' nor an email"),  # a bare name is not an owner
        (SOURCE_FRESHNESS_DAYS_ENV, "weekly", "positive number of days"),
        (SOURCE_FRESHNESS_DAYS_ENV, "0", "positive number of days"),
    ],
)
def test_a_bad_setting_names_its_variable(monkeypatch, variable, value, message):
    monkeypatch.setenv(variable, value)
    with pytest.raises(ValueError, match=message) as error:
        with_catalog(ALL_ASSETS)
    assert variable in str(error.value)
