"""``run_failure_alert_sensor`` against real failed runs and a real webhook on the loopback interface.

A range run of a partitioned table fails for real on a test instance (one bad partition); the sensor is
evaluated tick by tick with Dagster's own evaluation (the first tick sets its cursor, the next one sees the
failed run) and posts to an HTTP server started by the test on 127.0.0.1, which records every body. A
webhook that is down or answers with an error is logged and the sensor goes on.
"""

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import dagster as dg
import polars as pl
import pytest

from assets.partition_ranges import SINGLE_RUN, run_partitions
from pipelines.alerts import (
    RUN_FAILURE_SENSOR,
    UI_URL_ENV,
    WEBHOOK_URL_ENV,
    run_failure_alert_sensor,
)
from pipelines.cli import partition_range_tags
from pipelines.definitions import defs as project_defs

pytestmark = pytest.mark.slow  # real runs on a real instance

shards = dg.StaticPartitionsDefinition(["a", "b", "c"])


def _shard(key: str):
    if key == "b":
        raise dg.Failure(description=f"shard {key}: 3 of 5 records unreadable\n(the second line is detail)")
    yield dg.Output(pl.DataFrame({"value": [1]}), output_name="shard_table")
    yield dg.Output(
        pl.DataFrame({"reason": []}, schema={"reason": pl.String}), output_name="shard_table_quarantine"
    )


@dg.multi_asset(
    outs={"shard_table": dg.AssetOut(), "shard_table_quarantine": dg.AssetOut()},
    partitions_def=shards,
    backfill_policy=SINGLE_RUN,
)
def shard_table_asset(context: dg.AssetExecutionContext):
    yield from run_partitions(context, _shard)


@dg.asset
def broken_table() -> pl.DataFrame:
    raise ValueError("scan scene_0003 has no frames\nTraceback detail")


@dg.asset(deps=[broken_table])
def table_after_broken() -> pl.DataFrame:
    return pl.DataFrame({"value": [1]})


class _MemoryIOManager(dg.IOManager):
    def handle_output(self, context: dg.OutputContext, obj) -> None:
        pass

    def load_input(self, context: dg.InputContext):
        raise NotImplementedError("nothing downstream reads these tables")


defs = dg.Definitions(
    assets=[shard_table_asset, broken_table, table_after_broken],
    sensors=[run_failure_alert_sensor],
    jobs=[
        dg.define_asset_job("shards_job", selection=dg.AssetSelection.assets(shard_table_asset)),
        dg.define_asset_job(
            "broken_job", selection=dg.AssetSelection.assets(broken_table, table_after_broken)
        ),
    ],
    resources={"io_manager": _MemoryIOManager()},
)


class Webhook:
    """An HTTP server on 127.0.0.1 that records the JSON body of every POST and answers ``status``."""

    def __init__(self, status: int = 200):
        self.bodies: list[dict] = []
        webhook = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                length = int(self.headers["Content-Length"])
                webhook.bodies.append(json.loads(self.rfile.read(length)))
                self.send_response(status)
                self.end_headers()

            def log_message(self, format, *args):  # quiet
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hooks/spatial"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join()


@pytest.fixture
def webhook() -> Iterator[Webhook]:
    server = Webhook()
    yield server
    server.close()


class Ticks:
    """The sensor evaluated as the daemon evaluates it: one tick after another, with the cursor carried on."""

    def __init__(self, instance: dg.DagsterInstance):
        self.instance, self.cursor = instance, None

    def tick(self) -> list:
        context = dg.build_sensor_context(instance=self.instance, definitions=defs, cursor=self.cursor)
        result = run_failure_alert_sensor.evaluate_tick(context)
        self.cursor = result.cursor
        return list(result.dagster_run_reactions or [])


def _fail(instance: dg.DagsterInstance, job: str, **run) -> dg.ExecuteInProcessResult:
    result = defs.resolve_job_def(job).execute_in_process(instance=instance, raise_on_error=False, **run)
    assert not result.success
    return result


def test_a_failed_range_run_is_posted_and_logged(webhook, monkeypatch, capfd):
    monkeypatch.setenv(WEBHOOK_URL_ENV, webhook.url)
    monkeypatch.setenv(UI_URL_ENV, "http://dagster.lab:3000/")
    with dg.instance_for_test() as instance:
        ticks = Ticks(instance)
        assert ticks.tick() == []  # the first tick sets the cursor
        failed = _fail(
            instance,
            "shards_job",
            tags={**partition_range_tags("a", "c"), "spatial/trigger": "raw_scan_files"},
        )
        capfd.readouterr()  # the run's own log
        (reaction,) = ticks.tick()
        logged = capfd.readouterr().err
        assert reaction.error is None and reaction.dagster_run.run_id == failed.run_id
        assert webhook.bodies == [
            {
                "event": "run_failure",
                "run_id": failed.run_id,
                "job": "shards_job",
                "partition": "a...c",
                "failed_steps": ["shard_table_asset"],
                "failed_assets": ["shard_table", "shard_table_quarantine"],
                "held_back_assets": [],
                "error": "shard b: 3 of 5 records unreadable",
                "trigger": "raw_scan_files",
                "run_path": f"/runs/{failed.run_id}",
                "run_url": f"http://dagster.lab:3000/runs/{failed.run_id}",
                "text": webhook.bodies[0]["text"],
            }
        ]
        line = webhook.bodies[0]["text"]
        assert "\n" not in line and failed.run_id[:8] in line and "shard b: 3 of 5 records unreadable" in line
        assert line in logged
        assert ticks.tick() == []  # reported once


def test_a_webhook_that_is_down_or_refuses_is_logged_and_the_sensor_goes_on(monkeypatch, capfd):
    closed = Webhook()
    closed.close()  # nothing listens on its port any more
    refusing = Webhook(status=500)
    try:
        with dg.instance_for_test() as instance:
            ticks = Ticks(instance)
            ticks.tick()
            for url in (closed.url, refusing.url):
                monkeypatch.setenv(WEBHOOK_URL_ENV, url)
                failed = _fail(instance, "broken_job")
                capfd.readouterr()  # the run's own log
                (reaction,) = ticks.tick()
                logged = capfd.readouterr().err
                assert reaction.error is None and reaction.dagster_run.run_id == failed.run_id
                assert f"run-failure webhook {url} failed for run {failed.run_id}" in logged
                # The op's own error, not Dagster's wrapper around it.
                assert "assets broken_table: ValueError: scan scene_0003 has no frames; held back" in logged
            assert len(refusing.bodies) == 1 and refusing.bodies[0]["failed_assets"] == ["broken_table"]
            # what the failure held back is named: its step never ran, the automation waits for the failed table
            assert refusing.bodies[0]["held_back_assets"] == ["table_after_broken"]
            assert "held back until broken_table is rebuilt: table_after_broken" in refusing.bodies[0]["text"]
            assert refusing.bodies[0]["partition"] is None
    finally:
        refusing.close()


def test_without_a_webhook_the_sensor_only_logs(webhook, monkeypatch, capfd):
    monkeypatch.delenv(WEBHOOK_URL_ENV, raising=False)
    monkeypatch.delenv(UI_URL_ENV, raising=False)
    with dg.instance_for_test() as instance:
        ticks = Ticks(instance)
        ticks.tick()
        failed = _fail(instance, "shards_job", partition_key="b")
        capfd.readouterr()  # the run's own log
        (reaction,) = ticks.tick()
        logged = capfd.readouterr().err
        assert reaction.error is None
        assert f"Run {failed.run_id[:8]} of shards_job failed (partition b)" in logged
        assert f"http://localhost:3000/runs/{failed.run_id}" in logged  # the default UI address
        assert "webhook" not in logged
    assert webhook.bodies == []


def test_the_project_runs_the_sensor():
    sensor = project_defs.resolve_sensor_def(RUN_FAILURE_SENSOR)
    assert isinstance(sensor, dg.RunStatusSensorDefinition)
    assert sensor.default_status == dg.DefaultSensorStatus.RUNNING
