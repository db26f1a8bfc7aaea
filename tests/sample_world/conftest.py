"""Fixtures of the sample world tests: one small world generated once per session."""

from __future__ import annotations

import json

import pytest

from assets.sample_world import generate_sample_world
from tests.sample_world.world_helpers import World, small_config


@pytest.fixture(scope="session")
def small_world(tmp_path_factory: pytest.TempPathFactory) -> World:
    """2 scenes x 3 views at 64x48, generated once."""
    root = tmp_path_factory.mktemp("world") / "sample_world"
    config = small_config(root)
    summary = generate_sample_world(config)
    truth = json.loads((root / "truth" / "world.json").read_text())
    return World(root=root, config=config, summary=summary, truth=truth)


@pytest.fixture(scope="session")
def exact_small_world(tmp_path_factory: pytest.TempPathFactory) -> World:
    """The same small world with the generator's exact scans (``scan_realism="exact"``: exact depth and poses)."""
    root = tmp_path_factory.mktemp("exact_world") / "sample_world"
    config = small_config(root, scan_realism="exact")
    summary = generate_sample_world(config)
    truth = json.loads((root / "truth" / "world.json").read_text())
    return World(root=root, config=config, summary=summary, truth=truth)
