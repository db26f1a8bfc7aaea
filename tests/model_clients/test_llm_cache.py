"""The response cache, its content-hash keys, and the price table (cache.py, pricing.py)."""

from __future__ import annotations

import sqlite3

import pytest

from model_clients.cache import CachedResponse, ResponseCache, compute_cache_key
from model_clients.pricing import DEFAULT_PRICE_TABLE, ModelPrice, cost_usd, find_price
from model_clients.records import LLMRequest, TokenUsage

BASE_REQUEST = LLMRequest(
    "object_phrases",
    "v1",
    "Which objects are mentioned?",
    system="You list objects.",
    images=[b"\x89PNG\r\n\x1a\nA"],
    schema={"type": "object"},
)
BASE_KEY_ARGS = ("openai", "gpt-4o-mini", BASE_REQUEST, {"temperature": 0.0, "max_tokens": 256}, "native")


def _entry(key: str, status: str = "ok", data=None) -> CachedResponse:
    return CachedResponse(
        key,
        "openai",
        "gpt-4o-mini",
        "t",
        "v1",
        status,
        '{"a": 1}',
        data,
        None,
        TokenUsage(10, 5),
        0.001,
        1,
        123.0,
    )


class TestCacheKey:
    def test_deterministic(self):
        assert compute_cache_key(*BASE_KEY_ARGS) == compute_cache_key(*BASE_KEY_ARGS)

    @pytest.mark.parametrize(
        "changed",
        [
            ("anthropic", "gpt-4o-mini", BASE_REQUEST, BASE_KEY_ARGS[3], "native"),  # provider
            ("openai", "gpt-4o", BASE_REQUEST, BASE_KEY_ARGS[3], "native"),  # model
            (
                "openai",
                "gpt-4o-mini",
                BASE_REQUEST,
                {"temperature": 0.7, "max_tokens": 256},
                "native",
            ),  # params
            ("openai", "gpt-4o-mini", BASE_REQUEST, BASE_KEY_ARGS[3], "prompt"),  # output mode
        ],
    )
    def test_sensitive_to_call_settings(self, changed):
        assert compute_cache_key(*changed) != compute_cache_key(*BASE_KEY_ARGS)

    @pytest.mark.parametrize(
        "field_changes",
        [
            {"template_version": "v2"},  # prompt template version
            {"prompt": "Which objects are named?"},  # rendered prompt
            {"system": "You list things."},  # system prompt
            {"images": [b"\x89PNG\r\n\x1a\nB"]},  # image content
            {"schema": {"type": "object", "required": ["x"]}},  # schema
            {"sample_index": 1},  # another sample of the same prompt
        ],
    )
    def test_sensitive_to_request_content(self, field_changes):
        fields = {
            name: getattr(BASE_REQUEST, name)
            for name in ("template_name", "template_version", "prompt", "system", "images", "schema")
        }
        fields.update(field_changes)
        changed = LLMRequest(**fields)
        assert compute_cache_key("openai", "gpt-4o-mini", changed, *BASE_KEY_ARGS[3:]) != compute_cache_key(
            *BASE_KEY_ARGS
        )

    def test_request_id_is_not_part_of_the_key(self):
        relabelled = LLMRequest(
            BASE_REQUEST.template_name,
            BASE_REQUEST.template_version,
            BASE_REQUEST.prompt,
            system=BASE_REQUEST.system,
            images=BASE_REQUEST.images,
            schema=BASE_REQUEST.schema,
            request_id="question-17",
        )
        assert compute_cache_key(
            "openai", "gpt-4o-mini", relabelled, *BASE_KEY_ARGS[3:]
        ) == compute_cache_key(*BASE_KEY_ARGS)

    def test_parameter_order_does_not_matter(self):
        reordered = {"max_tokens": 256, "temperature": 0.0}
        assert compute_cache_key(
            "openai", "gpt-4o-mini", BASE_REQUEST, reordered, "native"
        ) == compute_cache_key(*BASE_KEY_ARGS)

    def test_images_must_be_bytes(self):
        with pytest.raises(TypeError, match="images\\[0\\]"):
            LLMRequest("t", "v1", "p", images=["/path/to/image.png"])


class TestResponseCache:
    def test_roundtrip_and_missing_keys(self, tmp_path):
        with ResponseCache(tmp_path / "sub" / "cache.sqlite") as cache:
            cache.put(_entry("k1", data={"phrases": ["red car"]}))
            found = cache.get_many(["k1", "absent"])
        assert set(found) == {"k1"}
        assert found["k1"].data == {"phrases": ["red car"]}
        assert found["k1"].usage == TokenUsage(10, 5)

    def test_each_put_is_committed_and_visible_to_another_connection(self, tmp_path):
        path = tmp_path / "cache.sqlite"
        with ResponseCache(path) as writer:
            writer.put(_entry("k1", data=1))
            with sqlite3.connect(path) as reader:
                assert reader.execute("SELECT COUNT(*) FROM responses").fetchone()[0] == 1

    def test_wal_journal(self, tmp_path):
        with ResponseCache(tmp_path / "cache.sqlite") as cache:
            mode = cache._connection.execute("PRAGMA journal_mode").fetchone()[0]
        assert mode == "wal"

    def test_batched_lookup_beyond_one_chunk(self, tmp_path):
        with ResponseCache(tmp_path / "cache.sqlite") as cache:
            for index in range(1_200):
                cache.put(_entry(f"k{index}", data=index))
            found = cache.get_many([f"k{index}" for index in range(1_300)])
            assert len(cache) == 1_200
        assert len(found) == 1_200
        assert found["k1199"].data == 1199

    def test_replace_and_delete(self, tmp_path):
        with ResponseCache(tmp_path / "cache.sqlite") as cache:
            cache.put(_entry("k1", status="invalid_response"))
            cache.put(_entry("k1", status="ok", data=2))
            assert cache.get_many(["k1"])["k1"].status == "ok"
            assert cache.delete(["k1", "k2"]) == 1
            assert cache.get_many(["k1"]) == {}


class TestPricing:
    @pytest.mark.parametrize(
        ("model", "expected"),
        [
            ("gpt-4o-mini", DEFAULT_PRICE_TABLE["gpt-4o-mini"]),  # exact
            ("gpt-4o-mini-2024-07-18", DEFAULT_PRICE_TABLE["gpt-4o-mini"]),  # dated snapshot of its family
            ("gpt-4o-2024-08-06", DEFAULT_PRICE_TABLE["gpt-4o"]),  # not mistaken for mini
            ("gpt-4o-2024-05-13", ModelPrice(5.0, 15.0)),  # a snapshot with its own price
            ("gpt-4.1-mini-2025-04-14", DEFAULT_PRICE_TABLE["gpt-4.1-mini"]),  # not priced as gpt-4.1
            ("claude-sonnet-4-20250514", DEFAULT_PRICE_TABLE["claude-sonnet-4"]),  # Anthropic snapshot
            ("claude-3-5-haiku-latest", DEFAULT_PRICE_TABLE["claude-3-5-haiku"]),  # an alias
            ("gpt-4o-audio-preview", None),  # another model of the family: unpriced, not gpt-4o's price
            ("deepseek-reasoner", None),  # not in the table: unpriced
            ("Qwen2.5-VL-7B-Instruct", None),  # local model: unpriced
        ],
    )
    def test_find_price(self, model, expected):
        assert find_price(model, DEFAULT_PRICE_TABLE) == expected

    def test_cost(self):
        assert cost_usd(TokenUsage(2_000, 1_000), ModelPrice(3.0, 15.0)) == pytest.approx(0.021)
        assert cost_usd(TokenUsage(2_000, 1_000), None) == 0.0
