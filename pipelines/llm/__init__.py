"""Shared LLM client layer: provider adapters, response cache, retries, rate limit and cost accounting.

The public API, used by the LLM-backed assets (object phrases, STVQA generation and pass@2 answering):

- :class:`LLMRequest` in, :class:`LLMResult` out, through :meth:`LLMClient.run_batch`;
- :class:`LLMClientConfig` for plain Python use, :class:`pipelines.llm.resources.LLMResource` for Dagster
  (imported from its module, so this package does not import Dagster);
- :class:`UsageSummary` (`client.summary.as_metadata()`) for asset metadata;
- :class:`ResponseCache` and :func:`compute_cache_key` for inspection.

See `pipelines/llm/client.py` for the behaviour (caching, retries, quarantine) and an example.
"""

from pipelines.llm.cache import CachedResponse, ResponseCache, compute_cache_key
from pipelines.llm.client import LLMClient, LLMClientConfig, UsageSummary
from pipelines.llm.pricing import DEFAULT_PRICE_TABLE, ModelPrice
from pipelines.llm.records import LLMRequest, LLMResult, ResultStatus, TokenUsage
from pipelines.llm.schema import ResponseFormatError, parse_json_text, validate_json

__all__ = [
    "DEFAULT_PRICE_TABLE",
    "CachedResponse",
    "LLMClient",
    "LLMClientConfig",
    "LLMRequest",
    "LLMResult",
    "ModelPrice",
    "ResponseCache",
    "ResponseFormatError",
    "ResultStatus",
    "TokenUsage",
    "UsageSummary",
    "compute_cache_key",
    "parse_json_text",
    "validate_json",
]
