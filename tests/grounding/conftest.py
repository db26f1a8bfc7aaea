"""Fixtures of the grounding tests: the LLM loopback servers, questions, resources (the tiny Grounding DINO is
in ``tests/conftest.py``, shared with the Ray tests)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import polars as pl
import pytest

TEST_API_KEY = "sk-test-grounding-5c1d9e7a3b"
"""A key-shaped secret that must never reach an output, metadata, a log line or the cache file."""
SELECTION = ["object_phrases", "object_phrases_quarantine"]
"""The phrase step's tables."""
FAST = {"backoff_base_s": 0.01, "backoff_max_s": 0.02, "max_retries": 1, "timeout_s": 2.0}
"""LLM settings that give up quickly (the loopback servers answer at once or not at all)."""


@pytest.fixture(autouse=True)
def single_torch_thread() -> Iterator[None]:
    """Run torch on one thread in these tests (restored afterwards).

    The tiny detector's forward passes are so small that on a shared two-core machine a second
    thread costs far more in contention than it gains.
    """
    torch = sys.modules.get("torch")
    if torch is None:
        yield
        return
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


@pytest.fixture(scope="session")
def world_questions(small_world: Path) -> pl.DataFrame:
    """The small world's OmniSpatial questions as an `mcq_questions` frame (read once; origin: the sample world)."""
    from data_contracts.origin import SAMPLE_WORLD
    from readers.mcq import read_omnispatial

    frame, log = read_omnispatial(small_world / "omnispatial", split="train")
    assert len(log) == 0
    return frame.with_columns(origin=pl.lit(SAMPLE_WORLD))


def grounding_resources(storage_root: Path, world: Path, **llm_settings) -> dict:
    """Resources for `dg.materialize` of the source and grounding assets."""
    from assets.resources import LLMResource, SourcesResource, StorageResource, WorkersResource
    from pipelines.io_manager import ParquetIOManager

    return {
        "io_manager": ParquetIOManager(root=str(storage_root)),
        "storage": StorageResource(root=str(storage_root)),
        "sources": SourcesResource(sample_world_root=str(world)),
        "workers": WorkersResource(max_workers=1),
        "phrase_llm": LLMResource(storage_root=str(storage_root), **llm_settings),
        "sft_reasoning_llm": LLMResource(storage_root=str(storage_root), **llm_settings),
    }


def asset_metadata(result, asset: str = "object_phrases") -> dict:
    """The metadata values of ``asset``'s (first) materialization in a `dg.materialize` result."""
    event = next(e for e in result.get_asset_materialization_events() if e.asset_key.path == [asset])
    return {name: value.value for name, value in event.materialization.metadata.items()}
