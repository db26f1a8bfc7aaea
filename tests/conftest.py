"""Shared test set-up: offline hubs, a small sample world, a tiny Grounding DINO, a temporary storage root."""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from pathlib import Path  # noqa: E402

import pytest  # noqa: E402

SMALL_WORLD = {"seed": 7, "num_scenes": 2, "views_per_scene": 3, "width": 160, "height": 120}


@pytest.fixture(scope="session")
def small_world(tmp_path_factory) -> Path:
    """A small sample world (2 scenes, 3 views, 160x120), built once per test session. Do not modify it."""
    from assets.sample_world import SampleWorldConfig, generate_sample_world

    root = tmp_path_factory.mktemp("world") / "sample_world"
    generate_sample_world(SampleWorldConfig(root=root, show_progress=False, **SMALL_WORLD))
    return root


@pytest.fixture(scope="session")
def tiny_grounding_dino(tmp_path_factory) -> Path:
    """A Grounding DINO with random weights, tokenizer and image processor saved to a folder, built once per
    test session (the grounding and the Ray tests use it). Do not modify it."""
    from assets.grounding.detector import build_tiny_grounding_dino

    return build_tiny_grounding_dino(tmp_path_factory.mktemp("models") / "tiny-grounding-dino", seed=0)


@pytest.fixture
def world_copy(small_world, tmp_path) -> Path:
    """A private copy of the small world that a test may break."""
    import shutil

    target = tmp_path / "sample_world"
    shutil.copytree(small_world, target)
    return target


# Loopback OpenAI / Anthropic servers (real HTTP on 127.0.0.1) shared by every test folder.
from tests.fakes.llm_servers import anthropic_server, llm_server_factory, openai_server  # noqa: E402, F401
