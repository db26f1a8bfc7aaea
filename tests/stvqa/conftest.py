"""Fixtures for the STVQA tests: the sample world's scene graphs and geometry, and LLM clients bound to
the loopback Anthropic / OpenAI servers."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from assets.sources.readers import read_visual_genome
from assets.stvqa.geometry import ImageGeometry, load_geometry
from pipelines.llm import LLMClient, LLMClientConfig
from tests.fakes.llm_servers import LoopbackLLMServer, anthropic_server, llm_server_factory, openai_server  # noqa: F401

TEST_API_KEY = "sk-stvqa-test-5d1c9a7e3b"


@pytest.fixture(scope="session")
def sample_scene_graphs(small_world: Path) -> pl.DataFrame:
    """The small sample world's Visual-Genome-like scene graphs, read as the ``scene_graphs`` asset reads them."""
    frame, _ = read_visual_genome(small_world / "visual_genome")
    return frame.sort("image_id")


@pytest.fixture(scope="session")
def sample_geometry(small_world: Path) -> dict[str, ImageGeometry]:
    """Exact per-object geometry of the small sample world (from ``truth/world.json``)."""
    return dict(load_geometry(small_world / "truth" / "world.json"))


@pytest.fixture
def make_llm_client(tmp_path: Path) -> Iterator[Callable[..., LLMClient]]:
    """`make_llm_client(server, **overrides)`: a client for a loopback server with fast retries and a cache in
    `tmp_path`; every client is closed at teardown."""
    clients: list[LLMClient] = []

    def make(server: LoopbackLLMServer, **overrides: Any) -> LLMClient:
        settings: dict[str, Any] = {
            "provider": server.protocol,
            "model": "claude-sonnet-4-20250514" if server.protocol == "anthropic" else "gpt-4o",
            "base_url": server.base_url,
            "api_key": TEST_API_KEY,
            "cache_path": tmp_path / "llm_cache" / "responses.sqlite",
            "max_concurrency": 4,
            "backoff_base_s": 0.01,
            "backoff_max_s": 0.05,
            "timeout_s": 2.0,
            "seed": 0,
        }
        settings.update(overrides)
        client = LLMClient(LLMClientConfig(**settings))
        clients.append(client)
        return client

    yield make
    for client in clients:
        client.close()
