"""The operator-signal checks (``pipelines.signals``) on a real instance: materialize, materialize again with
fewer rows or more quarantine, and read the WARN results and their figures (now against the previous
materialization).

Two small assets go through the project's own machinery (``finalize_table``, ``run_partitions``, the Parquet
IO manager, the ``scenes`` partitions): an unpartitioned table with a downstream asset, and a per-scan table
named ``scene_geometry`` (so it carries ``frames_used_drop`` too) built as range runs and one-partition runs.
The last test reads the checks that ``spatial-build`` ran on the small world of ``dev_build``.
"""

import dagster as dg
import dataframely as dy
import polars as pl
import pytest

from assets.partition_ranges import SINGLE_RUN, run_partitions
from assets.partitions import SCENES_PARTITIONS_NAME, scenes_partitions
from assets.tables import (
    CHECKED_WITH_ITS_TABLE,
    contract_check_specs,
    finalize_table,
    quarantine_output,
    table_and_quarantine_outs,
)
from data_contracts.quarantine import QuarantineLog
from pipelines.cli import partition_range_tags
from pipelines.definitions import ALL_ASSETS, defs
from pipelines.io_manager import ParquetIOManager
from pipelines.signals import (
    FRAMES_USED_DROP_CHECK,
    QUARANTINE_SHARE_CHECK,
    ROW_COUNT_DROP_CHECK,
    build_signal_checks,
)

pytestmark = pytest.mark.slow  # runs on a real instance, each paying Dagster's run set-up

SCENES = ["scene_a", "scene_b", "scene_c"]


class Numbers(dy.Schema):
    """A table of non-negative numbers."""

    key = dy.String(primary_key=True)
    value = dy.Int64(min=0)


class NumbersConfig(dg.Config):
    """How many rows each partition (``all`` when unpartitioned) gets, how many input records are bad, and how
    many frames a scan used."""

    rows: dict[str, int]
    bad: dict[str, int] = {}
    frames: dict[str, int] = {}


def _table(name: str, part: str, config: NumbersConfig):
    """One table's outputs and contract check, the way the project's assets make them."""
    log = QuarantineLog(name)
    for index in range(config.bad.get(part, 0)):
        log.add(f"{part}/bad{index}", "unreadable record: test input")
    frame = pl.DataFrame(
        {"key": [f"{part}/{i}" for i in range(config.rows[part])], "value": list(range(config.rows[part]))},
        schema={"key": pl.String, "value": pl.Int64},
    )
    extra = {"frames_used": config.frames[part]} if part in config.frames else None
    checked = finalize_table(
        frame, Numbers, "1", asset_key=name, quarantine=log, extra_metadata=extra, partition_key=part
    )
    quarantine, metadata = quarantine_output(log)
    yield dg.Output(checked.frame, output_name=name, metadata=checked.metadata)
    yield checked.check
    yield dg.Output(quarantine, output_name=f"{name}_quarantine", metadata=metadata)


@dg.multi_asset(
    outs=table_and_quarantine_outs("numbers", "Numbers.", "1"), check_specs=contract_check_specs("numbers")
)
def numbers_asset(config: NumbersConfig):
    yield from _table("numbers", "all", config)


@dg.asset
def numbers_total(numbers: pl.DataFrame) -> dg.MaterializeResult:
    """Downstream of ``numbers``: runs whatever the signals say."""
    return dg.MaterializeResult(metadata={"total": int(numbers["value"].sum())})


@dg.multi_asset(
    outs=table_and_quarantine_outs("scene_geometry", "Per scan numbers.", "1"),
    check_specs=contract_check_specs("scene_geometry"),
    partitions_def=scenes_partitions,
    backfill_policy=SINGLE_RUN,
)
def scan_numbers_asset(context: dg.AssetExecutionContext, config: NumbersConfig):
    yield from run_partitions(context, lambda scene: _table("scene_geometry", scene, config))


def _run(instance, root, assets_def, config: NumbersConfig, **run) -> dg.ExecuteInProcessResult:
    others = [numbers_total] if assets_def is numbers_asset else []
    result = dg.materialize(
        [assets_def, *others, *build_signal_checks([assets_def])],
        instance=instance,
        resources={"io_manager": ParquetIOManager(root=str(root))},
        run_config={"ops": {assets_def.node_def.name: {"config": config.model_dump()}}},
        **run,
    )
    assert result.success  # a warning never fails a run
    return result


def _signals(result: dg.ExecuteInProcessResult) -> dict[str, dg.AssetCheckEvaluation]:
    evaluations = {evaluation.check_name: evaluation for evaluation in result.get_asset_check_evaluations()}
    assert all(
        evaluation.severity == dg.AssetCheckSeverity.WARN
        for name, evaluation in evaluations.items()
        if name != "contract"
    )
    return evaluations


def _values(evaluation: dg.AssetCheckEvaluation) -> dict:
    return {name: value.value for name, value in evaluation.metadata.items()}


def test_an_unpartitioned_table_warns_on_a_row_drop_and_on_quarantine(tmp_path):
    with dg.instance_for_test() as instance:
        first = _run(instance, tmp_path, numbers_asset, NumbersConfig(rows={"all": 10}))
        signals = _signals(first)
        assert {QUARANTINE_SHARE_CHECK, ROW_COUNT_DROP_CHECK} <= set(signals)
        assert all(evaluation.passed for evaluation in signals.values())
        assert "previous_rows" not in _values(signals[ROW_COUNT_DROP_CHECK])  # nothing to compare with yet

        second = _run(instance, tmp_path, numbers_asset, NumbersConfig(rows={"all": 4}, bad={"all": 2}))
        signals = _signals(second)
        drop, share = signals[ROW_COUNT_DROP_CHECK], signals[QUARANTINE_SHARE_CHECK]
        assert not drop.passed and not share.passed
        assert _values(drop) == {
            "rows": 4,
            "previous_rows": 10,
            "ratio": 0.4,
            "min_ratio": 0.5,
            "previous_run_id": first.run_id,
        }
        assert _values(share) == {
            "rows": 4,
            "quarantined": 2,
            "share": pytest.approx(2 / 6, abs=1e-4),
            "previous_share": 0.0,
            "max_share": 0.1,
            "previous_run_id": first.run_id,
        }
        assert signals["contract"].passed
        # Not blocking: the downstream asset was built from the smaller table.
        (total,) = [
            event
            for event in second.get_asset_materialization_events()
            if event.asset_key.path == ["numbers_total"]
        ]
        assert total.materialization.metadata["total"].value == sum(range(4))

        third = _run(instance, tmp_path, numbers_asset, NumbersConfig(rows={"all": 3}))  # 3 of 4: within 50%
        signals = _signals(third)
        assert signals[ROW_COUNT_DROP_CHECK].passed and signals[QUARANTINE_SHARE_CHECK].passed
        assert _values(signals[ROW_COUNT_DROP_CHECK])["previous_run_id"] == second.run_id


def test_a_scan_partition_with_fewer_rows_or_frames_warns_in_range_and_single_runs(tmp_path):
    full = NumbersConfig(rows=dict.fromkeys(SCENES, 10), frames=dict.fromkeys(SCENES, 12))
    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions(SCENES_PARTITIONS_NAME, SCENES)
        first = _run(
            instance, tmp_path, scan_numbers_asset, full, tags=partition_range_tags(SCENES[0], SCENES[-1])
        )
        assert all(evaluation.passed for evaluation in _signals(first).values())

        # scene_b is read with 3 of its 10 rows and fused from 11 of its 12 frames; scene_c loses 2 of 10 rows.
        fewer = NumbersConfig(
            rows={**full.rows, "scene_b": 3, "scene_c": 8},
            frames={**full.frames, "scene_b": 11},
            bad={"scene_a": 5},
        )
        second = _run(
            instance, tmp_path, scan_numbers_asset, fewer, tags=partition_range_tags(SCENES[0], SCENES[-1])
        )
        signals = _signals(second)
        drop, frames, share = (
            signals[name] for name in (ROW_COUNT_DROP_CHECK, FRAMES_USED_DROP_CHECK, QUARANTINE_SHARE_CHECK)
        )
        assert not drop.passed and not frames.passed and not share.passed
        assert _values(drop)["partitions_warned"] == ["scene_b"]  # scene_c kept 80%
        assert _values(drop)["partitions_checked"] == 3
        by_scene = _values(drop)["by_partition"]
        assert by_scene["scene_b"] == {
            "rows": 3,
            "previous_rows": 10,
            "ratio": 0.3,
            "min_ratio": 0.5,
            "previous_run_id": first.run_id,
        }
        assert by_scene["scene_c"]["ratio"] == 0.8
        assert _values(frames)["partitions_warned"] == ["scene_b"]  # any drop of frames warns
        assert _values(frames)["by_partition"]["scene_b"]["frames_used"] == 11
        assert _values(frames)["by_partition"]["scene_b"]["previous_frames_used"] == 12
        assert _values(share)["partitions_warned"] == ["scene_a"]  # 5 of 15 records quarantined
        assert _values(share)["by_partition"]["scene_a"]["share"] == pytest.approx(1 / 3, abs=1e-4)

        # One partition (as the automation runs one edited scan): compared with that scan's previous build only.
        single = _run(instance, tmp_path, scan_numbers_asset, full, partition_key="scene_b")
        signals = _signals(single)
        assert signals[ROW_COUNT_DROP_CHECK].passed and signals[FRAMES_USED_DROP_CHECK].passed
        assert _values(signals[ROW_COUNT_DROP_CHECK])["by_partition"] == {
            "scene_b": {
                "rows": 10,
                "previous_rows": 3,
                "ratio": pytest.approx(10 / 3, abs=1e-4),
                "min_ratio": 0.5,
                "previous_run_id": second.run_id,
            }
        }
        one_range = _run(
            instance,
            tmp_path,
            scan_numbers_asset,
            NumbersConfig(rows={"scene_c": 2}),
            tags=partition_range_tags("scene_c", "scene_c"),
        )
        signals = _signals(one_range)
        assert _values(signals[ROW_COUNT_DROP_CHECK])["partitions_warned"] == ["scene_c"]  # 2 of 8


def test_every_table_of_the_graph_has_the_signals_and_they_ride_along():
    graph = defs.resolve_asset_graph()
    tables = {key.asset_key for key in graph.asset_check_keys if key.name == "contract"}
    assert {key.asset_key for key in graph.asset_check_keys if key.name == QUARANTINE_SHARE_CHECK} == tables
    assert {key.asset_key for key in graph.asset_check_keys if key.name == ROW_COUNT_DROP_CHECK} == tables
    assert {
        key.asset_key.to_user_string() for key in graph.asset_check_keys if key.name == FRAMES_USED_DROP_CHECK
    } == {"scene_geometry"}
    for check in build_signal_checks(ALL_ASSETS):
        for spec in check.check_specs:
            # No automation condition of their own: the automation's runs (and backfills) include them with
            # their asset, because the table's contract check has one; never blocking.
            assert spec.automation_condition is None and not spec.blocking, spec.key
    for key in graph.asset_check_keys:
        if key.name == "contract":
            assert graph.get(key).automation_condition == CHECKED_WITH_ITS_TABLE, key
    rgbd_frames = next(
        spec
        for check in build_signal_checks(ALL_ASSETS)
        for spec in check.check_specs
        if spec.key == dg.AssetCheckKey(dg.AssetKey("rgbd_frames"), ROW_COUNT_DROP_CHECK)
    )
    assert "fewer frames than before" in rgbd_frames.description


def test_spatial_build_runs_the_signals_of_every_table(dev_build):
    instance = dev_build.instance
    evaluations = [
        record.event_log_entry.dagster_event.asset_check_evaluation_data
        for run in instance.get_run_records()
        for record in instance.get_records_for_run(
            run.dagster_run.run_id, of_type=dg.DagsterEventType.ASSET_CHECK_EVALUATION
        ).records
    ]
    checked = {(evaluation.asset_key.to_user_string(), evaluation.check_name) for evaluation in evaluations}
    graph = defs.resolve_asset_graph()
    tables = {key.asset_key.to_user_string() for key in graph.asset_check_keys if key.name == "contract"}
    for table in tables:
        assert {(table, QUARANTINE_SHARE_CHECK), (table, ROW_COUNT_DROP_CHECK)} <= checked, table
    assert ("scene_geometry", FRAMES_USED_DROP_CHECK) in checked
    signals = [evaluation for evaluation in evaluations if evaluation.check_name != "contract"]
    assert {evaluation.severity for evaluation in signals} == {dg.AssetCheckSeverity.WARN}
