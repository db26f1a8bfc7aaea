"""Fixtures for the STVQA tests: the sample world's scene graphs and geometry, and LLM clients bound to
the loopback Anthropic / OpenAI servers."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import polars as pl
import pytest

from assets.stvqa.geometry import ImageGeometry, load_geometry
from model_clients import LLMClient
from readers.scene_graphs import read_visual_genome
from tests.fakes.llm_servers import loopback_client_factory

TEST_API_KEY = "sk-stvqa-test-5d1c9a7e3b"


@pytest.fixture(scope="session")
def sample_scene_graphs(small_world: Path) -> pl.DataFrame:
    """The small sample world's Visual-Genome-like scene graphs, read as the ``scene_graphs`` asset reads them
    (with the ``origin`` the asset gives them)."""
    frame, _ = read_visual_genome(small_world / "visual_genome")
    return frame.with_columns(origin=pl.lit("sample_world")).sort("image_id")


@pytest.fixture(scope="session")
def sample_geometry(small_world: Path) -> dict[str, ImageGeometry]:
    """Exact per-object geometry of the small sample world (from ``truth/world.json``)."""
    return dict(load_geometry(small_world / "truth" / "world.json"))


@pytest.fixture
def make_llm_client(tmp_path: Path) -> Iterator[Callable[..., LLMClient]]:
    """`make_llm_client(server, **overrides)`: a client for a loopback server (see `loopback_client_factory`)."""
    make, clients = loopback_client_factory(tmp_path, TEST_API_KEY, openai_model="gpt-4o")
    yield make
    for client in clients:
        client.close()
