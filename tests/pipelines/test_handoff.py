"""Build, then train, with no path flags: ``spatial-train`` reads what ``spatial-build`` wrote.

Exactly the READMEs' sequence: ``./dev.sh build`` (``README.md``, dev.sh's environment, no
``--storage-root``), then (``training/README.md``), in a plain shell in the same folder (neither
``DAGSTER_HOME`` nor ``SPATIAL_DATA_ROOT`` set), the tiny model of the smoke recipe and
``spatial-train grpo --config training/recipes/smoke.yaml``.
"""

from __future__ import annotations

import os
from pathlib import Path

import polars as pl
import pytest

REPOSITORY_ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow


def test_train_on_what_the_build_wrote(dev_build, monkeypatch):
    from training.cli import main as train
    from training.testing import main as testing

    assert pl.read_parquet(dev_build.storage / "spatialcore_train.parquet").height > 0
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    monkeypatch.delenv("SPATIAL_DATA_ROOT", raising=False)
    monkeypatch.chdir(dev_build.workdir)
    assert testing(["tiny-model", "outputs/tiny-qwen3-vl"]) == 0
    assert train(["grpo", "--config", str(REPOSITORY_ROOT / "training" / "recipes" / "smoke.yaml")]) == 0
    checkpoints = sorted((dev_build.workdir / "outputs" / "smoke").glob("checkpoint-*"))
    assert checkpoints, os.listdir(dev_build.workdir / "outputs" / "smoke")
