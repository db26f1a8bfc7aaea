"""Fixtures for the LLM client tests: the loopback servers and a client factory bound to them."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from model_clients import LLMClient
from tests.fakes.llm_servers import loopback_client_factory

TEST_API_KEY = "sk-test-7f3a9c1e5b2d4680aa11"
"""A key-shaped secret that must never show up in logs, results, metadata or the cache file."""

PHRASES_SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "required": ["phrases"],
    "properties": {"phrases": {"type": "array", "items": {"type": "string", "minLength": 1}}},
}


@pytest.fixture
def make_llm_client(tmp_path: Path) -> Iterator[Callable[..., LLMClient]]:
    """`make_llm_client(server, **overrides)`: a client for a loopback server (see `loopback_client_factory`)."""
    make, clients = loopback_client_factory(tmp_path, TEST_API_KEY, openai_model="gpt-4o-mini")
    yield make
    for client in clients:
        client.close()
