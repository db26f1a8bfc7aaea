"""The checks of a failed run's skipped steps show their table's standing result, not "Execution failed".

Real runs on a test instance: ``scan_table`` feeds ``geometry`` (a blocking contract check in its step) and
``geometry_signals`` (a WARN check in a step of its own). A first run builds both and passes; a second run fails
at ``scan_table``, so neither later step starts. Dagster alone resolves their checks' latest records as
EXECUTION_FAILED; after :func:`report_standing_checks` (or the run-failure sensor, as the daemon runs it) they
resolve as the first run's results, naming both runs and the reason; ``spatial-build`` does the same after
its own failed runs. A check whose own step ran and failed keeps its failure, and a table never built gets
nothing reported.
"""

from __future__ import annotations

import argparse
import asyncio

import dagster as dg
import pytest
from dagster._core.loader import LoadingContextForTest
from dagster._core.storage.asset_check_execution_record import AssetCheckExecutionResolvedStatus

from pipelines.alerts import run_failure_alert_sensor
from pipelines.cli import Build
from pipelines.unrun_checks import report_standing_checks, unrun_checks

pytestmark = pytest.mark.slow  # real runs on a real instance


class Faults(dg.ConfigurableResource):
    broken_scan: bool = False
    failing_contract: bool = False


@dg.asset
def scan_table(faults: Faults) -> int:
    if faults.broken_scan:
        raise ValueError("scan scene_0003 has no frames")
    return 1


@dg.asset(check_specs=[dg.AssetCheckSpec("contract", asset="geometry", blocking=True)])
def geometry(scan_table: int, faults: Faults):
    yield dg.Output(scan_table + 1)
    yield dg.AssetCheckResult(
        check_name="contract", passed=not faults.failing_contract, metadata={"rows": 12}
    )


@dg.asset_check(asset=geometry, name="signals")
def geometry_signals() -> dg.AssetCheckResult:
    return dg.AssetCheckResult(passed=False, severity=dg.AssetCheckSeverity.WARN, metadata={"frames_used": 5})


class _MemoryIOManager(dg.IOManager):
    def handle_output(self, context: dg.OutputContext, obj) -> None:
        pass

    def load_input(self, context: dg.InputContext):
        return 1


CONTRACT = dg.AssetCheckKey(dg.AssetKey("geometry"), "contract")
SIGNALS = dg.AssetCheckKey(dg.AssetKey("geometry"), "signals")


def _definitions(**faults: bool) -> dg.Definitions:
    return dg.Definitions(
        assets=[scan_table, geometry],
        asset_checks=[geometry_signals],
        sensors=[run_failure_alert_sensor],
        resources={"io_manager": _MemoryIOManager(), "faults": Faults(**faults)},
    )


def _run(instance: dg.DagsterInstance, **faults: bool) -> dg.ExecuteInProcessResult:
    job = _definitions(**faults).resolve_implicit_global_asset_job_def()
    return job.execute_in_process(instance=instance, raise_on_error=False)


def _status(instance: dg.DagsterInstance, key: dg.AssetCheckKey):
    record = instance.get_latest_asset_check_evaluation_record(key)
    assert record is not None
    return record, asyncio.run(record.resolve_status(LoadingContextForTest(instance)))


def test_the_checks_of_steps_a_failure_skipped_show_the_standing_results():
    with dg.instance_for_test() as instance:
        first = _run(instance)
        assert first.success
        failed = _run(instance, broken_scan=True)
        assert not failed.success
        assert (
            _status(instance, CONTRACT)[1] == AssetCheckExecutionResolvedStatus.EXECUTION_FAILED
        )  # Dagster's
        assert set(unrun_checks(instance, failed.run_id)) == {CONTRACT, SIGNALS}

        reported = report_standing_checks(instance, failed.run_id, "step scan_table failed")

        assert set(reported) == {CONTRACT, SIGNALS}
        expected = {
            CONTRACT: (AssetCheckExecutionResolvedStatus.SUCCEEDED, "rows", 12),
            SIGNALS: (AssetCheckExecutionResolvedStatus.FAILED, "frames_used", 5),  # a WARN stays a WARN
        }
        for key, (status, name, value) in expected.items():
            record, resolved = _status(instance, key)
            assert resolved == status
            evaluation = record.event.dagster_event.asset_check_evaluation_data
            metadata = {name: entry.value for name, entry in evaluation.metadata.items()}
            assert metadata[name] == value
            assert metadata["carried_from_run"] == first.run_id
            assert metadata["not_run_in"] == failed.run_id
            assert metadata["reason"] == "step scan_table failed"
            assert evaluation.target_materialization_data.run_id == first.run_id


def test_a_check_that_ran_and_failed_keeps_its_failure_and_an_unbuilt_table_gets_nothing():
    with dg.instance_for_test() as instance:
        never_built = _run(instance, broken_scan=True)
        assert report_standing_checks(instance, never_built.run_id, "step scan_table failed") == []
        assert _status(instance, CONTRACT)[1] == AssetCheckExecutionResolvedStatus.EXECUTION_FAILED

        assert _run(instance).success
        failing = _run(instance, failing_contract=True)  # the blocking check fails in its own step
        assert not failing.success
        assert set(unrun_checks(instance, failing.run_id)) == {SIGNALS}  # skipped after the blocking failure
        report_standing_checks(instance, failing.run_id, "step geometry failed")
        assert _status(instance, CONTRACT)[1] == AssetCheckExecutionResolvedStatus.FAILED


def test_the_run_failure_sensor_shows_the_standing_results_of_what_it_skipped(monkeypatch):
    monkeypatch.delenv("SPATIAL_ALERT_WEBHOOK_URL", raising=False)
    definitions = _definitions()
    with dg.instance_for_test() as instance:
        context = dg.build_sensor_context(instance=instance, definitions=definitions)
        cursor = run_failure_alert_sensor.evaluate_tick(context).cursor  # the first tick sets the cursor
        assert _run(instance).success
        failed = _run(instance, broken_scan=True)
        context = dg.build_sensor_context(instance=instance, definitions=definitions, cursor=cursor)
        (reaction,) = run_failure_alert_sensor.evaluate_tick(context).dagster_run_reactions or []
        assert reaction.dagster_run is not None and reaction.dagster_run.run_id == failed.run_id
        assert _status(instance, CONTRACT)[1] == AssetCheckExecutionResolvedStatus.SUCCEEDED
        record, _ = _status(instance, SIGNALS)
        metadata = record.event.dagster_event.asset_check_evaluation_data.metadata
        assert metadata["reason"].value == "step scan_table failed"


def test_spatial_build_shows_the_standing_results_after_a_failed_run():
    definitions = dg.Definitions(
        assets=[scan_table, geometry],
        asset_checks=[geometry_signals],
        jobs=[dg.define_asset_job("scan_job", selection=dg.AssetSelection.assets(scan_table, geometry))],
        resources={"io_manager": _MemoryIOManager(), "faults": Faults()},
    )
    arguments = argparse.Namespace(workers=None, scenes=None, views=None, seed=None, verbose=False)
    with dg.instance_for_test() as instance:
        build = Build(defs=definitions, instance=instance, args=arguments, tags={})
        assert build.execute("scan_job", None, {})
        broken = {"resources": {"faults": {"config": {"broken_scan": True}}}}
        assert not build.execute("scan_job", None, broken, log_failure=False)
        for key in (CONTRACT, SIGNALS):
            record, resolved = _status(instance, key)
            assert resolved != AssetCheckExecutionResolvedStatus.EXECUTION_FAILED
            reason = record.event.dagster_event.asset_check_evaluation_data.metadata["reason"].value
            assert reason == "step scan_table failed"
