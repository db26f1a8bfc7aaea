"""A small world built the way ``./dev.sh build`` builds it: ``DAGSTER_HOME`` and ``SPATIAL_DATA_ROOT`` set
as dev.sh sets them (``./.dagster_home``, ``./data``), no path flags."""

from __future__ import annotations

import contextlib
import io
from dataclasses import dataclass
from pathlib import Path

import dagster as dg
import pytest


@dataclass
class DevBuild:
    """Where a ``spatial-build`` with no path flags wrote: the instance, its home and the storage root; and
    what it printed (the summary)."""

    instance: dg.DagsterInstance
    dagster_home: Path
    storage: Path
    workdir: Path
    output: str


@pytest.fixture(scope="session")
def dev_build(tmp_path_factory) -> DevBuild:
    """``spatial-build --scenes 2 --views 3`` from a fresh working folder with dev.sh's environment.

    Shared by the tests of this folder; those that change files leave the data valid. ``output`` is what the
    build printed.
    """
    from pipelines.cli import main

    workdir = tmp_path_factory.mktemp("dev_build")
    dagster_home = workdir / ".dagster_home"
    dagster_home.mkdir()
    (dagster_home / "dagster.yaml").write_text(
        (Path(__file__).resolve().parents[2] / "pipelines" / "deploy" / "dagster.yaml").read_text()
    )
    output = io.StringIO()
    with pytest.MonkeyPatch.context() as patch, contextlib.redirect_stdout(output):
        patch.setenv("DAGSTER_HOME", str(dagster_home))
        patch.setenv("SPATIAL_DATA_ROOT", str(workdir / "data"))
        patch.chdir(workdir)
        status = main(["--scenes", "2", "--views", "3", "--quiet"])
        instance = dg.DagsterInstance.from_config(str(dagster_home))  # the template reads $DAGSTER_HOME
    assert status == 0, output.getvalue()
    return DevBuild(instance, dagster_home, workdir / "data", workdir, output.getvalue())
