"""Fixtures for the LLM client tests: the loopback servers and a client factory bound to them."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from pipelines.llm import LLMClient, LLMClientConfig
from tests.fakes.llm_servers import LoopbackLLMServer, anthropic_server, llm_server_factory, openai_server  # noqa: F401

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
    """`make_llm_client(server, **config_overrides)`: a client for a loopback server with fast retries.

    Defaults: the test key, a cache file in `tmp_path`, backoff base 10 ms, timeout 2 s, seeded jitter.
    Every client made is closed at teardown.
    """
    clients: list[LLMClient] = []

    def make(server: LoopbackLLMServer, **overrides: Any) -> LLMClient:
        settings: dict[str, Any] = {
            "provider": server.protocol,
            "model": "gpt-4o-mini" if server.protocol == "openai" else "claude-sonnet-4-20250514",
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
