"""Shared LLM client layer: provider adapters, response cache, retries, rate limit and cost accounting.

The public API, used by the LLM-backed assets (object phrases, STVQA generation and pass@2 answering):

- :class:`LLMRequest` in, :class:`LLMResult` out, through :meth:`LLMClient.run_batch`;
- :class:`LLMClientConfig` for plain Python use, :class:`assets.resources.LLMResource` for Dagster
  (imported from its module, so this package does not import Dagster);
- :class:`UsageSummary` (`client.summary.as_metadata()`) for asset metadata, and the failure check of an
  online asset (:class:`FailureBudgetSettings`, :func:`failure_budget_message`, :mod:`model_clients.failures`);
- :class:`ResponseCache` and :func:`compute_cache_key` for inspection;
- batch mode (``mode="batch"``: OpenAI's Batch API and Anthropic's Message Batches at the batch price,
  :mod:`model_clients.batch_mode`), the cost estimate before spending (:class:`CostEstimate`,
  :meth:`LLMClient.estimate`) and the budget (``max_cost_usd``, a cap: :class:`BudgetExceededError`,
  :class:`UnpricedModelError`);
- stages that ask in rounds over many shards, each round of every shard in one call
  (:mod:`model_clients.rounds`).

See `model_clients/client.py` for the behaviour (caching, retries, quarantine) and an example.
"""

from model_clients.cache import CachedResponse, ResponseCache, compute_cache_key
from model_clients.client import (
    BudgetExceededError,
    LLMClient,
    LLMClientConfig,
    UnpricedModelError,
    UsageSummary,
)
from model_clients.estimate import CostEstimate, TokenEstimator
from model_clients.failures import (
    DEFAULT_MAX_FAILURE_FRACTION,
    FailureBudgetSettings,
    failure_budget_message,
    failure_fraction,
    failure_metadata,
)
from model_clients.pricing import DEFAULT_PRICE_TABLE, ModelPrice
from model_clients.records import LLMRequest, LLMResult, ResultStatus, TokenUsage
from model_clients.schema import ResponseFormatError, parse_json_text, validate_json

__all__ = [
    "DEFAULT_MAX_FAILURE_FRACTION",
    "DEFAULT_PRICE_TABLE",
    "BudgetExceededError",
    "CachedResponse",
    "CostEstimate",
    "FailureBudgetSettings",
    "LLMClient",
    "LLMClientConfig",
    "LLMRequest",
    "LLMResult",
    "ModelPrice",
    "ResponseCache",
    "ResponseFormatError",
    "ResultStatus",
    "TokenEstimator",
    "TokenUsage",
    "UnpricedModelError",
    "UsageSummary",
    "compute_cache_key",
    "failure_budget_message",
    "failure_fraction",
    "failure_metadata",
    "parse_json_text",
    "validate_json",
]
