"""Fixtures of the sample world tests: small worlds generated once per test run and shared by the xdist workers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from assets.sample_world import ensure_sample_world, generate_sample_world
from tests.conftest import build_once_per_run
from tests.sample_world.world_helpers import World, small_config


def _world(tmp_path_factory: pytest.TempPathFactory, name: str, **overrides) -> World:
    """A small world generated once per test run (shared by the xdist workers; do not modify it)."""

    def build(folder: Path) -> None:
        generate_sample_world(small_config(folder / "sample_world", **overrides))

    root = build_once_per_run(tmp_path_factory, name, build) / "sample_world"
    config = small_config(root, **overrides)
    summary, rebuilt = ensure_sample_world(config)  # the summary its build recorded (files checked)
    assert not rebuilt, f"the shared world {root} was not complete"
    truth = json.loads((root / "truth" / "world.json").read_text())
    return World(root=root, config=config, summary=summary, truth=truth)


@pytest.fixture(scope="session")
def small_world(tmp_path_factory: pytest.TempPathFactory) -> World:
    """2 scenes x 3 views at 64x48, generated once."""
    return _world(tmp_path_factory, "small_world")


@pytest.fixture(scope="session")
def exact_small_world(tmp_path_factory: pytest.TempPathFactory) -> World:
    """The same small world with the generator's exact scans (``scan_realism="exact"``: exact depth and poses)."""
    return _world(tmp_path_factory, "exact_small_world", scan_realism="exact")
