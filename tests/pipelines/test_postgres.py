"""The PostgreSQL deployment against a real server: ``pipelines/deploy/dagster-postgres.yaml`` end to end.

A PostgreSQL server is started from the system binaries (Debian's ``postgresql`` package, which
``./dev.sh`` installs) in a temporary folder on a free port; PostgreSQL refuses to run as root, so
as root it runs as the ``postgres`` user. The instance is the deployment file with its ``DAGSTER_PG_*``
variables pointing at that server. The sample world and the sources are built into it with
``spatial-build``, then ``dge_job`` runs over a range of one scene (what a backfill or the automation
launches for partitions that are not adjacent) through ``execute_job`` (a run worker as the daemon
launches it, its steps in its own process), and over the range of both scenes in one process; the runs
and materialisations are read back from the instance.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import dagster as dg
import pytest

from pipelines.run_tags import PARTITION_RANGE_START_TAG

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

DEPLOY = Path(__file__).resolve().parents[2] / "pipelines" / "deploy"
PG_USER = "dagster"
PG_DB = "dagster"


def _pg_bin() -> Path:
    """The newest installed PostgreSQL's binaries folder."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(p.split("/")[-3]))
    if not found:
        pytest.fail("PostgreSQL is not installed (./dev.sh install adds Debian's postgresql package)")
    return Path(found[-1]).parent


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def postgres_server() -> Iterator[dict[str, str]]:
    """A throwaway PostgreSQL server; yields the ``DAGSTER_PG_*`` variables that reach it."""
    pytest.importorskip("dagster_postgres", reason="./dev.sh installs dagster-postgres")
    bin_dir = _pg_bin()
    # Not under pytest's tmp folder: as root, that is closed to the postgres user.
    folder = Path(tempfile.mkdtemp(prefix="spatial-pg-"))
    as_user: list[str] = []
    if os.geteuid() == 0:
        shutil.chown(folder, user="postgres")
        as_user = ["runuser", "-u", "postgres", "--"]
    data, port = folder / "data", _free_port()

    def pg(tool: str, *args: str) -> None:
        subprocess.run([*as_user, str(bin_dir / tool), *args], check=True, capture_output=True, timeout=60)

    pg("initdb", "-D", str(data), "-U", PG_USER, "--auth=trust", "-E", "UTF8", "--no-sync")
    options = f"-p {port} -k {folder} -c listen_addresses=127.0.0.1 -c fsync=off"
    pg("pg_ctl", "-D", str(data), "-l", str(folder / "server.log"), "-o", options, "-w", "start")
    try:
        pg("createdb", "-h", "127.0.0.1", "-p", str(port), "-U", PG_USER, PG_DB)
        yield {
            "DAGSTER_PG_HOST": "127.0.0.1",
            "DAGSTER_PG_PORT": str(port),
            "DAGSTER_PG_USER": PG_USER,
            "DAGSTER_PG_PASSWORD": "unused-with-trust-auth",
            "DAGSTER_PG_DB": PG_DB,
        }
    finally:
        pg("pg_ctl", "-D", str(data), "-m", "immediate", "-w", "stop")
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="module")
def postgres_home(postgres_server, tmp_path_factory) -> Iterator[Path]:
    """``DAGSTER_HOME`` holding the PostgreSQL deployment file, its variables set."""
    home = tmp_path_factory.mktemp("pg_home")
    shutil.copy(DEPLOY / "dagster-postgres.yaml", home / "dagster.yaml")
    with pytest.MonkeyPatch.context() as patch:
        for name, value in postgres_server.items():
            patch.setenv(name, value)
        patch.setenv("DAGSTER_HOME", str(home))
        patch.setenv("HF_HUB_OFFLINE", "1")
        patch.delenv("SPATIAL_DATA_ROOT", raising=False)  # the storage goes under $DAGSTER_HOME
        yield home


def dge_job() -> dg.JobDefinition:
    """``dge_job`` as the run's step processes load it (storage under ``$DAGSTER_HOME``).

    The step processes import this module from the working directory: the repository root.
    """
    from pipelines.definitions import build_definitions
    from pipelines.jobs import DGE_JOB

    return build_definitions().resolve_job_def(DGE_JOB)


def test_instance_loads_postgres_storage(postgres_home):
    """The deployment file gives PostgreSQL storage, the run queue, run monitoring and the pool settings."""
    from dagster_postgres import PostgresEventLogStorage, PostgresRunStorage, PostgresScheduleStorage

    with dg.DagsterInstance.get() as instance:
        assert isinstance(instance.run_storage, PostgresRunStorage)
        assert isinstance(instance.event_log_storage, PostgresEventLogStorage)
        assert isinstance(instance.schedule_storage, PostgresScheduleStorage)
        assert type(instance.run_coordinator).__name__ == "TaggingRunCoordinator"
        assert instance.run_monitoring_enabled
        pools = instance.get_concurrency_config().pool_config
        assert pools.default_pool_limit == 1
        assert pools.pool_granularity.value == "op"


def test_partitioned_build_on_postgres(postgres_home):
    """The sample world into PostgreSQL with spatial-build, then dge_job over a one-scene range through
    execute_job, then over every scene in one range run; the other scenes' partitions stay unbuilt until
    the range run of all.
    """
    from assets.partitions import SCENES_PARTITIONS_NAME
    from pipelines.cli import main, partition_range_tags
    from pipelines.jobs import DGE_JOB

    # The sample world and its scans as scene partitions.
    assert main(["--scenes", "2", "--views", "3", "--quiet", "--select", "key:sample_world"]) == 0
    with dg.DagsterInstance.get() as instance:
        scenes = instance.get_dynamic_partitions(SCENES_PARTITIONS_NAME)
        assert (
            len(scenes) == 4
        )  # two ScanNet scans, the default world's ARKitScenes video and ScanNet++ scene
        run_ids = []
        for scene in scenes[:1]:
            with dg.execute_job(
                dg.reconstructable(dge_job),
                instance=instance,
                tags=partition_range_tags(scene, scene),
            ) as result:
                assert result.success, scene
                run_ids.append(result.run_id)

        for run_id, scene in zip(run_ids, scenes[:1], strict=True):
            run = instance.get_run_by_id(run_id)
            assert run.status == dg.DagsterRunStatus.SUCCESS
            assert run.job_name == DGE_JOB
            assert run.tags[PARTITION_RANGE_START_TAG] == scene
            # Every step ran in the run's own process (the in-process executor), none in a process of its own.
            step_starts = instance.get_records_for_run(run_id, of_type=dg.DagsterEventType.STEP_START).records
            pids = {record.event_log_entry.dagster_event.pid for record in step_starts}
            assert len(step_starts) >= 4 and len(pids) == 1

        materialised = {
            key
            for run_id in run_ids
            for record in instance.get_records_for_run(
                run_id, of_type=dg.DagsterEventType.ASSET_MATERIALIZATION
            ).records
            for key in [record.event_log_entry.asset_materialization.asset_key]
        }
        assert {dg.AssetKey("rgbd_frames"), dg.AssetKey("scene_geometry")} <= materialised
        for key in materialised:
            partitions = instance.get_materialized_partitions(key)
            assert partitions == {scenes[0]}, key
        runs = instance.get_runs(filters=dg.RunsFilter(job_name=DGE_JOB))
        assert {run.run_id for run in runs} == set(run_ids)

        both = dge_job().execute_in_process(
            instance=instance, tags=partition_range_tags(scenes[0], scenes[-1])
        )
        assert both.success
        for key in materialised:
            assert instance.get_materialized_partitions(key) == set(scenes), key
