"""The shipped run coordinator tags an automation run when it is created, before it waits in the queue."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import dagster as dg
import polars as pl
import pytest

from assets.partitions import SCENES_PARTITIONS_NAME
from assets.raw_files import HASH_CACHE_NAME, FileHashCache, _observe
from data_contracts.parquet_files import write_parquet
from data_contracts.storage import table_path
from pipelines.io_manager import ParquetIOManager
from pipelines.run_coordinator import TaggingRunCoordinator
from pipelines.run_tags import PARTITION_RANGE_END_TAG, PARTITION_RANGE_START_TAG, PARTITION_TAG
from pipelines.run_triggers import AUTOMATION_RUN_TAG, CHANGED_FILES_TAG, TRIGGER_TAG, run_partitions

SHIPPED_CONFIG = Path(__file__).parents[2] / "pipelines" / "deploy" / "dagster.yaml"


@dg.asset(name="mcq_questions")
def questions() -> None:
    """A stand-in for the questions table: only its key and its file matter here."""


def _build_questions(root: Path, sources: Path) -> None:
    """The questions table as built from ``sources``' current files: its file records the observed version."""
    with FileHashCache(root / HASH_CACHE_NAME) as cache:
        version = _observe(cache, "raw_mcq_files", None, [sources])
    path = table_path(root, "mcq_questions")
    path.parent.mkdir(parents=True, exist_ok=True)
    write_parquet(
        pl.DataFrame({"id": ["q0"]}), path, {"input_data_versions": json.dumps({"raw_mcq_files": version})}
    )


def _observe_now(instance: dg.DagsterInstance, root: Path, sources: Path) -> None:
    with FileHashCache(root / HASH_CACHE_NAME) as cache:
        version = _observe(cache, "raw_mcq_files", None, [sources])
    instance.report_runless_asset_event(
        dg.AssetObservation(asset_key="raw_mcq_files", tags={"dagster/data_version": version})
    )


@pytest.fixture
def instance(tmp_path: Path, monkeypatch):
    """An instance with the shipped ``dagster.yaml``; what Dagster's queue receives is kept in ``queued``
    (enqueueing a run needs a code location's origin, which an in-process run has not)."""
    home = tmp_path / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text(SHIPPED_CONFIG.read_text())
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    with dg.DagsterInstance.from_config(str(home)) as instance:
        instance.queued = []

        def enqueue(coordinator, context):
            instance.queued.append(instance.get_run_by_id(context.dagster_run.run_id))
            return instance.queued[-1]

        monkeypatch.setattr(dg.QueuedRunCoordinator, "submit_run", enqueue)
        yield instance


def _submit(instance: dg.DagsterInstance, **run_arguments) -> dg.DagsterRun:
    """Create a run of the questions table and submit it to the instance's coordinator; the run as queued."""
    job = dg.Definitions(
        assets=[questions], resources={"io_manager": ParquetIOManager()}
    ).resolve_implicit_global_asset_job_def()
    run = instance.create_run_for_job(
        job, asset_selection=frozenset({dg.AssetKey("mcq_questions")}), **run_arguments
    )
    instance.run_coordinator.submit_run(dg.SubmitRunContext(run, SimpleNamespace(instance=instance)))
    (queued,) = instance.queued
    return queued


def test_the_shipped_instance_tags_an_automation_run_before_it_is_queued(instance, tmp_path):
    assert isinstance(instance.run_coordinator, TaggingRunCoordinator)
    root, sources = tmp_path / "data", tmp_path / "omnispatial"
    sources.mkdir()
    (sources / "data.json").write_text("[1]")
    (sources / "old.png").write_bytes(b"old")
    _build_questions(root, sources)
    (sources / "data.json").write_text("[1, 2]")
    (sources / "old.png").unlink()
    (sources / "new.png").write_bytes(b"new")
    _observe_now(instance, root, sources)

    queued = _submit(
        instance,
        tags={AUTOMATION_RUN_TAG: "true"},
        run_config={"resources": {"io_manager": {"config": {"root": str(root)}}}},
    )
    assert queued.tags[TRIGGER_TAG] == "raw_mcq_files"
    assert queued.tags[CHANGED_FILES_TAG] == "added new.png; edited data.json; deleted old.png"


def test_a_run_the_automation_did_not_start_is_queued_untagged(instance):
    assert TRIGGER_TAG not in _submit(instance).tags


def test_a_new_partition_says_so(instance, tmp_path):
    queued = _submit(
        instance,
        tags={AUTOMATION_RUN_TAG: "true"},
        run_config={"resources": {"io_manager": {"config": {"root": str(tmp_path / "data")}}}},
    )
    assert queued.tags[TRIGGER_TAG] == "new partition"


def test_a_range_run_of_scans_is_tagged_from_every_scan_of_its_range(instance):
    """A tick that changed several adjacent scans starts one range run: its tags come from every scan in the
    range (an edit in the middle one is named), in the scans' partition order, not from its two ends."""
    instance.add_dynamic_partitions(SCENES_PARTITIONS_NAME, ["scene_b", "scene_a", "scene_d", "scene_c"])
    scan_range = {PARTITION_RANGE_START_TAG: "scene_a", PARTITION_RANGE_END_TAG: "scene_c"}
    assert run_partitions(instance, scan_range) == ["scene_a", "scene_d", "scene_c"]
    assert run_partitions(instance, {PARTITION_TAG: "scene_d"}) == ["scene_d"]
    shards = {PARTITION_RANGE_START_TAG: "07", PARTITION_RANGE_END_TAG: "00"}  # not scans: the ends
    assert run_partitions(instance, shards) == ["00", "07"]
    assert run_partitions(instance, {}) == [None]
