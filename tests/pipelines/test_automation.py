"""The real automation against a real instance: what a tick requests, and that the requested runs succeed.

A small world is built with ``spatial-build`` into a temporary ``DAGSTER_HOME`` (``conftest.py``); then the project's
own Definitions (the rebuild policy on every asset, the observable raw folders, the raw-files
sensor) are evaluated tick by tick with Dagster's automation evaluator, and every requested
asset partition is executed through the project's named jobs, until a tick requests nothing.
What the daemon would launch for each tick is Dagster's own grouping of the requests into runs and
backfills (``build_run_requests``). The states: fresh (nothing to do); one raw file edited (exactly
its downstream); one question edited (the shards before what reads them); one scan edited (that scan's
chain in one run, only its files' fingerprints changed); one scan broken (its chain waits, the other
scan does not); one asset's code version changed (it and its downstream); a copied data folder
(nothing stale); a new scan folder (its partitions only). Every run says what started it. Two runs are executed
as the sensor launches them (the implicit asset job with the request's assets and checks): one scan rebuilt with
a frame quarantined, and the unpartitioned tables rebuilt with quarantined questions; both evaluate the operator
signals and warn.
"""

from __future__ import annotations

import datetime
import json
import shutil
from pathlib import Path

import dagster as dg
import pytest

# the daemon's own grouping of what one tick requested into runs and backfills
from dagster._core.definitions.automation_tick_evaluation_context import build_run_requests

from assets.partitions import SCENES_PARTITIONS_NAME
from assets.raw_files import RAW_FILE_ASSETS, FileHashCache, content_fingerprint
from assets.resources import SourcesResource
from data_contracts.storage import read_table_metadata
from pipelines.alerts import RUN_FAILURE_SENSOR
from pipelines.automation import OBSERVE_RAW_FILES_JOB, RAW_FILES_SENSOR
from pipelines.cli import build_waves, partition_range_tags
from pipelines.definitions import ALL_ASSETS, build_definitions
from pipelines.jobs import job_for
from pipelines.run_triggers import AUTOMATION_RUN_TAG, CHANGED_FILES_TAG, TRIGGER_TAG, trigger_tags
from pipelines.signals import (
    FRAMES_USED_DROP_CHECK,
    MAX_QUARANTINE_SHARE,
    QUARANTINE_SHARE_CHECK,
    ROW_COUNT_DROP_CHECK,
)
from tests.automation_ticks import evaluate_tick

pytestmark = pytest.mark.slow

MONDAY = datetime.datetime(2026, 11, 30, 12, 0)  # far from the weekly observation cron (Sundays 03:00)
RAW_FILE_KEYS = {"raw_mcq_files", "raw_scene_graph_files", "raw_scan_files"}
AUTOMATION_TAGS = {AUTOMATION_RUN_TAG: "true"}  # what the sensor puts on the runs it launches


def _stretches(ordered: list[str], wanted: set[str | None]) -> list[tuple[str, str]]:
    """The runs of consecutive keys of ``ordered`` that are in ``wanted``, as (first, last).

    >>> _stretches(["a", "b", "c", "d"], {"a", "b", "d"})
    [('a', 'b'), ('d', 'd')]
    """
    stretches: list[tuple[str, str]] = []
    previous_wanted = False
    for key in ordered:
        if key not in wanted:
            previous_wanted = False
            continue
        if previous_wanted:
            stretches[-1] = (stretches[-1][0], key)
        else:
            stretches.append((key, key))
        previous_wanted = True
    return stretches


class Automation:
    """Ticks of the automation over one instance, with the requested runs executed after each tick."""

    def __init__(self, defs: dg.Definitions, instance: dg.DagsterInstance):
        self.defs, self.instance = defs, instance
        self.cursor = None
        self.minute = 0
        self.range_runs = 0
        self.runs_by_tick: list[list[dg.RunRequest]] = []  # what the sensor would launch, per tick
        self.failed_runs: list[list[str]] = []
        self.allow_failures = False
        self.run_tags: list[dict[str, str]] = []  # of every run executed, in order
        self.launched: list[dg.ExecuteInProcessResult] = []  # the runs executed as the sensor launches them

    def tick(self, as_launched: bool = False) -> dict[str, set[str | None]]:
        """Evaluate once; execute what was requested (``as_launched``: each run request as the sensor launches
        it, :meth:`launch`); return it as {asset: {partitions}}."""
        self.minute += 1
        result = evaluate_tick(
            self.defs, self.instance, self.cursor, MONDAY + datetime.timedelta(minutes=self.minute)
        )
        self.cursor = result.cursor
        self.runs_by_tick.append(
            list(
                build_run_requests(
                    result._requested_subsets,  # noqa: SLF001 - the subsets the daemon turns into runs
                    self.defs.resolve_asset_graph(),
                    run_tags={},
                    emit_backfills=True,
                )
            )
        )
        requested = {
            key.to_user_string(): set(result.get_requested_partitions(key))
            for key in self.defs.resolve_asset_graph().get_all_asset_keys()
            if result.get_num_requested(key)
        }
        if as_launched:
            for request in self.runs_by_tick[-1]:
                self.launch(request)
        else:
            self.execute(requested)
        return requested

    def launch(self, request: dg.RunRequest) -> dg.ExecuteInProcessResult:
        """Execute one run request of a tick as the automation sensor launches it: the implicit asset job
        restricted to the request's assets and checks (every check of those assets when it names none), for its
        partition. Returns the run's result."""
        assert request.asset_graph_subset is None, (
            "a backfill: launched by the backfill daemon, not as one run"
        )
        checks = request.asset_check_keys
        job = self.defs.resolve_implicit_global_asset_job_def().get_subset(
            asset_selection=set(request.asset_selection or []),
            asset_check_selection=None if checks is None else set(checks),
        )
        result = job.execute_in_process(
            instance=self.instance,
            partition_key=request.partition_key,
            tags={**request.tags, **AUTOMATION_TAGS},
            raise_on_error=False,
        )
        self._check(result, list(request.asset_selection or []), request.partition_key)
        self.launched.append(result)
        return result

    def execute(self, requested: dict[str, set[str | None]]) -> None:
        """Run what was requested as a backfill of the single-run policy runs it: per wave, one range run per
        stretch of consecutive requested partitions (a stretch of one partition included)."""
        if RAW_FILE_KEYS & set(requested):
            self.observe()
        selection = dg.AssetSelection.assets(*(name for name in requested if name not in RAW_FILE_KEYS))
        for wave in build_waves(ALL_ASSETS, selection):
            keys = [key for node in wave for key in node.keys if key.to_user_string() in requested]
            partitions = set().union(*(requested[key.to_user_string()] for key in keys))
            job = self.defs.resolve_job_def(job_for(wave[0]))
            if wave[0].partitions_def is None:
                result = job.execute_in_process(
                    instance=self.instance, asset_selection=keys, tags=AUTOMATION_TAGS, raise_on_error=False
                )
                self._check(result, keys, None)
                continue
            ordered = wave[0].partitions_def.get_partition_keys(dynamic_partitions_store=self.instance)
            for first, last in _stretches(ordered, partitions):
                result = job.execute_in_process(
                    instance=self.instance,
                    asset_selection=keys,
                    tags={**AUTOMATION_TAGS, **partition_range_tags(first, last)},
                    raise_on_error=False,
                )
                self._check(result, keys, (first, last))
                self.range_runs += first != last

    def _check(self, result: dg.ExecuteInProcessResult, keys: list[dg.AssetKey], stretch) -> None:
        self.run_tags.append(self.instance.get_run_by_id(result.run_id).tags)
        if not result.success:
            errors = [event.step_failure_data.error.message for event in result.get_step_failure_events()]
            assert self.allow_failures, f"requested run of {keys} ({stretch}) failed: {errors}"
            self.failed_runs.append(sorted(key.to_user_string() for key in keys))

    def observe(self) -> None:
        assert (
            self.defs.resolve_job_def(OBSERVE_RAW_FILES_JOB)
            .execute_in_process(instance=self.instance)
            .success
        )

    def settle(self, max_ticks: int = 12) -> dict[str, set[str | None]]:
        """Tick until a tick requests nothing; everything requested on the way, merged."""
        everything: dict[str, set[str | None]] = {}
        for _ in range(max_ticks):
            requested = self.tick()
            if not requested:
                return everything
            for name, partitions in requested.items():
                everything.setdefault(name, set()).update(partitions)
        raise AssertionError(f"automation did not settle: {everything}")


def _run_shapes(requests: list[dg.RunRequest]) -> list[tuple[str, frozenset[str], str | None]]:
    """Each run request as (run or backfill, asset names, partition key)."""
    shapes = []
    for request in requests:
        if request.asset_graph_subset is not None:
            names = {key.to_user_string() for key in request.asset_graph_subset.asset_keys}
            shapes.append(("backfill", frozenset(names), None))
        else:
            names = {key.to_user_string() for key in request.asset_selection or []}
            shapes.append(("run", frozenset(names), request.partition_key))
    return shapes


def _fingerprints(storage, table: str) -> dict[str | None, str]:
    """``{partition: source_fingerprint}`` of every file of ``table``."""
    folder = storage / table
    if folder.is_dir():
        return {
            path.stem: read_table_metadata(storage, table, path.stem)["source_fingerprint"]
            for path in sorted(folder.glob("*.parquet"))
        }
    return {None: read_table_metadata(storage, table)["source_fingerprint"]}


def _dagster_versions(instance: dg.DagsterInstance, scan: str) -> dict[str, str]:
    """The data version Dagster recorded on the latest materialization of each table of ``scan``."""
    versions = {}
    for table in SCAN_CHAIN:
        scoped = dg.AssetRecordsFilter(asset_key=dg.AssetKey(table), asset_partitions=[scan])
        (record,) = instance.fetch_materializations(scoped, limit=1).records
        versions[table] = record.asset_materialization.tags["dagster/data_version"]
    return versions


def _latest_figure(instance: dg.DagsterInstance, table: str, partition: str, name: str) -> float:
    """A number from the metadata of the latest materialization of ``table``'s ``partition``."""
    scoped = dg.AssetRecordsFilter(asset_key=dg.AssetKey(table), asset_partitions=[partition])
    (record,) = instance.fetch_materializations(scoped, limit=1).records
    return record.asset_materialization.metadata[name].value


SCAN_CHAIN = ("rgbd_frames", "rgbd_scenes", "scene_geometry", "frame_visibility", "dge_tasks")


@pytest.fixture(scope="module")
def built(dev_build):
    """The instance and storage root of a small world built as ``./dev.sh build`` builds it."""
    return dev_build.instance, dev_build.storage


@pytest.fixture(scope="module")
def automation(built):
    instance, storage = built
    return Automation(build_definitions(str(storage)), instance)


def _scenes(instance) -> list[str]:
    return sorted(instance.get_dynamic_partitions(SCENES_PARTITIONS_NAME))


def _scannet_scenes(instance) -> list[str]:
    """The scans of the sample world's ScanNet layout (its ARKitScenes and ScanNet++ rooms left out)."""
    return [scene for scene in _scenes(instance) if scene.startswith("scene")]


def _downstream(defs: dg.Definitions, *names: str) -> set[str]:
    graph = defs.resolve_asset_graph()
    return {key.to_user_string() for key in dg.AssetSelection.assets(*names).downstream().resolve(graph)}


def _queued_tags(instance: dg.DagsterInstance, storage: Path, scan: str) -> dict[str, str]:
    """The trigger tags a run of ``scan``'s chain gets when it is queued now (:mod:`pipelines.run_coordinator`;
    the runs here execute in process, past the coordinator)."""
    return trigger_tags(instance, [dg.AssetKey(table) for table in SCAN_CHAIN], [scan], storage)


def test_1_fresh_build_requests_nothing(automation):
    assert automation.settle() == {}
    automation.observe()  # what the raw-files sensor does every few minutes: same content, same versions
    assert automation.settle() == {}


def test_2_one_raw_file_rebuilds_exactly_its_downstream(automation, built):
    _, storage = built
    relationships = storage / "sample_world" / "visual_genome" / "relationships.json"
    relationships.write_text(
        json.dumps(json.loads(relationships.read_text()), indent=1)
    )  # same graph, new bytes
    automation.observe()
    rebuilt = automation.settle()
    expected = _downstream(automation.defs, "scene_graphs") | {"scene_graphs_quarantine"}
    assert set(rebuilt) <= expected
    assert {"scene_graphs", "stvqa_candidates", "stvqa"} <= set(rebuilt)
    assert not {"mcq_questions", "rgbd_frames", "scene_geometry", "object_phrases"} & set(rebuilt)
    assert rebuilt["stvqa_candidates"] == set(
        automation.defs.resolve_assets_def("stvqa_candidates").partitions_def.get_partition_keys()
    )
    assert automation.range_runs  # the 32 shards ran as ranges, as the single-run backfill policy runs them


def test_2b_a_question_edit_rebuilds_the_shards_before_what_reads_them(automation, built):
    _, storage = built
    questions_file = storage / "sample_world" / "omnispatial" / "data.json"
    questions = json.loads(questions_file.read_text())
    questions[0]["question"] = questions[0]["question"].rstrip("?") + " from here?"
    questions_file.write_text(json.dumps(questions))
    automation.observe()
    ticks_before, runs_before = len(automation.runs_by_tick), len(automation.run_tags)
    rebuilt = automation.settle()
    assert {"mcq_questions", "object_phrases", "pseudo_gt_boxes", "spatialcore_train"} <= set(rebuilt)
    first_run = automation.run_tags[runs_before]
    assert (first_run[TRIGGER_TAG], first_run[CHANGED_FILES_TAG]) == ("raw_mcq_files", "edited data.json")
    assert "input:mcq_questions" in automation.run_tags[-1][TRIGGER_TAG]  # the tables built on the shards
    requested_by_tick = [
        {name for shape in _run_shapes(tick) for name in shape[1]}
        for tick in automation.runs_by_tick[ticks_before:]
    ]
    tick_of = {
        name: min(i for i, names in enumerate(requested_by_tick) if name in names)
        for name in ("mcq_questions", "pseudo_gt_boxes", "spatialcore_train")
    }
    # the training table waits for the shards, which wait for the questions: never new questions with old boxes
    assert tick_of["mcq_questions"] < tick_of["pseudo_gt_boxes"] < tick_of["spatialcore_train"]
    assert sum("spatialcore_train" in names for names in requested_by_tick) == 1  # built once
    assert any(kind == "backfill" for tick in automation.runs_by_tick for kind, _, _ in _run_shapes(tick))
    questions_version = read_table_metadata(storage, "mcq_questions")["data_version"]
    train_inputs = json.loads(read_table_metadata(storage, "spatialcore_train")["input_data_versions"])
    assert train_inputs["mcq_questions"] == questions_version
    shards = sorted(path.stem for path in (storage / "pseudo_gt_boxes").glob("*.parquet"))
    for shard in shards:  # every shard the training table read was built from the same questions
        shard_inputs = json.loads(
            read_table_metadata(storage, "pseudo_gt_boxes", shard)["input_data_versions"]
        )
        assert shard_inputs["mcq_questions"] == questions_version, shard


def test_3_one_scan_rebuilds_that_scan_only_in_one_run(automation, built):
    instance, storage = built
    first, second = _scannet_scenes(instance)
    before = {table: _fingerprints(storage, table) for table in SCAN_CHAIN}
    dagster_before = {scan: _dagster_versions(instance, scan) for scan in (first, second)}
    runs_before = len(automation.run_tags)
    pose = sorted((storage / "sample_world" / "scannet" / "scans" / first / "pose").glob("*.txt"))[0]
    pose.write_text(pose.read_text().replace("\n", " \n", 1))  # same pose, new bytes
    automation.observe()
    ticks_before = len(automation.runs_by_tick)
    rebuilt = automation.settle()
    for per_scan in SCAN_CHAIN:
        assert rebuilt[per_scan] == {first}, per_scan  # the other scan is left alone
    assert not {"mcq_questions", "scene_graphs", "stvqa"} & set(rebuilt)
    (chain_run,) = [run for tick in automation.runs_by_tick[ticks_before:] for run in tick]
    kind, names, partition = _run_shapes([chain_run])[0]
    assert (kind, partition) == ("run", first)  # one run for the whole chain of that scan
    assert set(SCAN_CHAIN) <= names
    (tags,) = automation.run_tags[runs_before:]  # the run says what started it
    assert tags[TRIGGER_TAG] == f"raw_scan_files[{first}]"
    assert tags[CHANGED_FILES_TAG] == f"edited pose/{pose.name}"
    after = {table: _fingerprints(storage, table) for table in SCAN_CHAIN}
    for table in SCAN_CHAIN:  # content-based provenance: the edited scan's files, and only them
        assert after[table][first] != before[table][first], table
        assert after[table][second] == before[table][second], table
    # Dagster's own data versions (what the UI compares) follow the scan's content too
    dagster_after = _dagster_versions(instance, first)
    assert all(dagster_after[table] != dagster_before[first][table] for table in SCAN_CHAIN), dagster_after
    assert _dagster_versions(instance, second) == dagster_before[second]


def test_3b_a_failed_scan_holds_back_its_chain_only(automation, built):
    instance, storage = built
    first = _scannet_scenes(instance)[0]
    intrinsics = storage / "sample_world" / "scannet" / "scans" / first / "intrinsic" / "intrinsic_color.txt"
    good = intrinsics.read_text()
    geometry_before = _fingerprints(storage, "scene_geometry")
    intrinsics.write_text("not a matrix\n")
    automation.allow_failures = True
    defs = automation.defs
    try:
        automation.observe()
        rebuilt = automation.settle()
        assert automation.failed_runs  # the scan's run failed at rgbd_frames ...
        assert _fingerprints(storage, "scene_geometry") == geometry_before  # ... and nothing after it ran
        assert rebuilt["rgbd_frames"] == {first}
        # a code change downstream now rebuilds the healthy scan, and waits for the failed one
        changed = dg.map_asset_specs(
            lambda spec: (
                spec.replace_attributes(code_version="changed")
                if spec.key.to_user_string() == "dge_tasks"
                else spec
            ),
            ALL_ASSETS,
        )
        automation.defs = dg.Definitions(
            assets=[*RAW_FILE_ASSETS, *changed],
            jobs=defs.jobs,
            sensors=defs.sensors,
            resources=defs.resources,
        )
        rebuilt = automation.settle()
        assert rebuilt["dge_tasks"] == set(_scenes(instance)) - {first}  # every healthy scan
        assert "scene_geometry" not in rebuilt
    finally:
        automation.defs = defs
        intrinsics.write_text(good)
        automation.allow_failures = False
    automation.observe()  # the scan restored and the code changed back: its chain, and every scan's tasks
    # the tables were built from what is there again: a run of the scan says it came back, and which file did
    assert _queued_tags(instance, storage, first) == {
        TRIGGER_TAG: f"raw_scan_files[{first}] restored",
        CHANGED_FILES_TAG: "edited intrinsic/intrinsic_color.txt",
    }
    rebuilt = automation.settle()
    assert {table: rebuilt[table] for table in SCAN_CHAIN[:4]} == dict.fromkeys(SCAN_CHAIN[:4], {first})
    assert rebuilt["dge_tasks"] == set(_scenes(instance))


def test_4_a_changed_code_version_rebuilds_it_and_its_downstream(automation):
    changed = dg.map_asset_specs(
        lambda spec: (
            spec.replace_attributes(code_version="changed")
            if spec.key.to_user_string() in ("object_phrases", "dge_tasks")
            else spec
        ),
        ALL_ASSETS,
    )
    defs = automation.defs
    automation.defs = dg.Definitions(
        assets=[*RAW_FILE_ASSETS, *changed],
        jobs=defs.jobs,
        sensors=defs.sensors,
        resources=defs.resources,
    )
    try:
        rebuilt = automation.settle()
    finally:
        automation.defs = defs
    assert {"object_phrases", "pseudo_gt_boxes", "spatialcore_train", "dge_tasks"} <= set(rebuilt)
    assert rebuilt["dge_tasks"] == set(_scenes(automation.instance))  # every scan's partition
    assert not {"mcq_questions", "scene_graphs", "scene_geometry", "stvqa_candidates"} & set(rebuilt)
    assert automation.settle() == rebuilt  # going back to the old code is a change too


def test_5_a_copied_data_folder_is_not_stale(automation, built, tmp_path):
    _, storage = built
    copy = tmp_path / "copied_world"
    shutil.copytree(storage / "sample_world", copy, copy_function=shutil.copy)  # new paths, new mtimes
    sources = SourcesResource(
        omnispatial_root=str(copy / "omnispatial"),
        spatialab_path=str(copy / "spatialab" / "spatialab.json"),
        visual_genome_root=str(copy / "visual_genome"),
        scannet_root=str(copy / "scannet" / "scans"),
        arkitscenes_root=str(copy / "arkitscenes" / "3dod"),
        scannetpp_root=str(copy / "scannetpp"),
    )
    defs = automation.defs
    automation.defs = dg.Definitions(
        assets=defs.assets,
        jobs=defs.jobs,
        sensors=defs.sensors,
        resources={**defs.resources, "sources": sources},
    )
    try:
        automation.observe()
        assert automation.settle() == {}
    finally:
        automation.defs = defs


def test_6_the_raw_files_sensor_adds_a_new_scan_and_only_it_is_built(automation, built):
    instance, storage = built
    scans = storage / "sample_world" / "scannet" / "scans"
    first = _scannet_scenes(instance)[0]
    shutil.copytree(scans / first, scans / "scene9999_00")
    sensor = automation.defs.resolve_sensor_def(RAW_FILES_SENSOR)
    resources = automation.defs.resources
    context = dg.build_sensor_context(
        instance=instance, resources={"sources": resources["sources"], "storage": resources["storage"]}
    )
    result = sensor(context)
    added = [key for request in result.dynamic_partitions_requests for key in request.partition_keys]
    assert added == ["scene9999_00"]
    assert [request.job_name or OBSERVE_RAW_FILES_JOB for request in result.run_requests] == [
        OBSERVE_RAW_FILES_JOB
    ]
    instance.add_dynamic_partitions(SCENES_PARTITIONS_NAME, added)
    automation.observe()
    rebuilt = automation.settle()
    for per_scan in ("scene_geometry", "frame_visibility", "dge_tasks"):
        assert rebuilt[per_scan] == {"scene9999_00"}, per_scan


def _warnings(result: dg.ExecuteInProcessResult) -> dict[tuple[str, str], dg.AssetCheckEvaluation]:
    """The operator signals (WARN checks) that ``result``'s run evaluated, by (table, check)."""
    return {
        (evaluation.asset_key.to_user_string(), evaluation.check_name): evaluation
        for evaluation in result.get_asset_check_evaluations()
        if evaluation.severity == dg.AssetCheckSeverity.WARN
    }


def test_7_a_one_scan_run_evaluates_the_signals_and_warns(automation, built):
    instance, storage = built
    first = _scannet_scenes(instance)[0]
    pose = sorted((storage / "sample_world" / "scannet" / "scans" / first / "pose").glob("*.txt"))[-1]
    good = pose.read_text()
    frames_before = _latest_figure(instance, "scene_geometry", first, "frames_used")
    automation.settle()  # nothing pending: the next tick is the edit's
    pose.unlink()  # the frame is quarantined: one frame fewer for the scan
    try:
        automation.observe()
        assert _queued_tags(instance, storage, first)[CHANGED_FILES_TAG] == f"deleted pose/{pose.name}"
        launched_before = len(automation.launched)
        rebuilt = automation.tick(as_launched=True)
        assert {table: rebuilt[table] for table in SCAN_CHAIN} == dict.fromkeys(SCAN_CHAIN, {first})
        (run,) = automation.launched[launched_before:]  # one run for the scan, as the sensor launches it
        assert run.success  # a warning never fails a run
        signals = _warnings(run)
        for table in SCAN_CHAIN:  # every table the run built had its signals evaluated
            assert {(table, QUARANTINE_SHARE_CHECK), (table, ROW_COUNT_DROP_CHECK)} <= set(signals), table
        share = signals[("rgbd_frames", QUARANTINE_SHARE_CHECK)]
        assert not share.passed
        figures = share.metadata["by_partition"].value[first]
        assert figures["quarantined"] == 1 and figures["share"] > MAX_QUARANTINE_SHARE
        frames = signals[("scene_geometry", FRAMES_USED_DROP_CHECK)]
        assert not frames.passed and frames.metadata["partitions_warned"].value == [first]
        figures = frames.metadata["by_partition"].value[first]
        assert (figures["frames_used"], figures["previous_frames_used"]) == (frames_before - 1, frames_before)
        stored = instance.event_log_storage.get_latest_asset_check_execution_by_key(
            [dg.AssetCheckKey(dg.AssetKey("scene_geometry"), FRAMES_USED_DROP_CHECK)]
        )
        (execution,) = stored.values()  # what the asset's Checks tab shows
        assert execution.run_id == run.run_id
    finally:
        pose.write_text(good)
    automation.observe()
    automation.execute(rebuilt)  # the scan as it was, for the tests after this one
    assert _latest_figure(instance, "scene_geometry", first, "frames_used") == frames_before


def test_8_an_unpartitioned_run_evaluates_the_signals_and_warns(automation, built):
    _, storage = built
    questions_file = storage / "sample_world" / "omnispatial" / "data.json"
    questions = json.loads(questions_file.read_text())
    automation.settle()  # nothing pending: the next tick is the edit's
    questions_file.write_text(json.dumps([*questions, "not a question", "nor this"]))  # 2 of 11 quarantined
    try:
        automation.observe()
        launched_before = len(automation.launched)
        rebuilt = automation.tick(as_launched=True)
        assert rebuilt["mcq_questions"] == {None}
        (run,) = automation.launched[launched_before:]
        assert run.success
        signals = _warnings(run)
        contracts = {
            evaluation.asset_key.to_user_string()
            for evaluation in run.get_asset_check_evaluations()
            if evaluation.check_name == "contract"
        }
        assert "mcq_questions" in contracts
        for table in contracts:  # every table the run built had its signals evaluated
            assert {(table, QUARANTINE_SHARE_CHECK), (table, ROW_COUNT_DROP_CHECK)} <= set(signals), table
        share = signals[("mcq_questions", QUARANTINE_SHARE_CHECK)]
        assert not share.passed
        assert (share.metadata["quarantined"].value, share.metadata["previous_share"].value) == (2, 0.0)
        assert share.metadata["share"].value > MAX_QUARANTINE_SHARE
    finally:
        questions_file.write_text(json.dumps(questions))
    automation.observe()
    # the questions as they were, and what reads them, for the tests after this one
    automation.execute(rebuilt)
    automation.settle()


def test_content_fingerprint_ignores_location_and_follows_content(tmp_path):
    root = tmp_path / "raw"
    (root / "sub").mkdir(parents=True)
    (root / "sub" / "a.json").write_text("[1]")
    (root / "b.txt").write_text("b")
    moved = tmp_path / "elsewhere" / "raw"
    with FileHashCache(tmp_path / "hashes.sqlite") as cache:
        original = content_fingerprint([root], cache)
        shutil.copytree(root, moved, copy_function=shutil.copy)
        assert content_fingerprint([moved], cache) == original
        (moved / "sub" / "a.json").write_text("[2]")
        assert content_fingerprint([moved], cache) != original
        (moved / "sub" / "a.json").write_text("[1]")
        (moved / "sub" / "a.json").rename(moved / "sub" / "c.json")
        assert content_fingerprint([moved], cache) != original  # a renamed file is a change
        assert content_fingerprint([None], cache) != content_fingerprint([], cache)


def test_definitions_carry_the_rebuild_policy_and_the_sensors():
    defs = build_definitions()
    dg.Definitions.validate_loadable(defs)
    assert {sensor.name for sensor in defs.sensors} == {
        "datasets_automation_sensor",
        RAW_FILES_SENSOR,
        RUN_FAILURE_SENSOR,
    }
    observe = defs.resolve_job_def(OBSERVE_RAW_FILES_JOB)
    assert observe.executor_def is dg.in_process_executor  # one process for seconds of work
    for spec in defs.resolve_all_asset_specs():
        # the opt-in publishing asset: never requested by automation
        if spec.key == dg.AssetKey("hub_dataset"):
            assert spec.automation_condition is None
            continue
        assert spec.automation_condition is not None, spec.key
