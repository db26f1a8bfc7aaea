"""The provider-agnostic request runner: cache, concurrency, rate limit, retries, validation, cost.

:class:`LLMClient` is what the LLM-backed assets call (phrase extraction for the SpatialCORE
pseudo-GT, question generation and pass@2 answering for STVQA). One call runs a whole batch:

1. every request gets its cache key (:func:`model_clients.cache.compute_cache_key`); identical
   requests in the batch are sent once;
2. the keys are looked up in the SQLite cache in a few batched queries; hits are returned at once;
3. the misses go to a pool of `max_concurrency` worker threads; each call first takes a token from
   the rate limiter, then goes through the provider adapter;
4. transport failures (timeouts, dropped connections, truncated or non-JSON bodies, 408/409/425/429/5xx)
   are retried up to `max_retries` times with jittered exponential backoff, or after the server's
   `Retry-After` (a 429 also pauses the whole limiter); refused requests (400, 401, 403, 404, 422) are
   not retried;
5. an answer that is not JSON of the request's schema, or that the request's own `answer_check`
   refuses (the pass@2 judge: not one option letter), is asked again `invalid_json_retries` times (once
   by default), then quarantined with its raw text and the reason; a cached `ok` answer that the
   `answer_check` refuses is asked again as well;
6. every answer the provider returned (valid, or invalid after the re-asks) is committed to the cache
   as soon as it arrives, so a killed run resumes without paying twice. Transport failures are not
   cached: the next run tries them again;
7. results come back in the order of the requests, and a :class:`UsageSummary` adds up requests,
   cache hits, API calls, retries, failures (and their first reasons), tokens and dollars for the asset
   metadata; :mod:`model_clients.failures` turns it into the failure check of an online asset.

Before step 3, the uncached requests are estimated (:mod:`model_clients.estimate`: prompt tokens as the
provider counts text and images, completion tokens from the template's observed mean or the request's
budget, dollars at the mode's price); the estimate is logged and kept in the summary beside the actual
cost. ``max_cost_usd`` is a cap on what the client spends: the call raises :class:`BudgetExceededError`
before sending anything when its upper bound (every request, every re-ask of an unusable answer) could pass
it (:meth:`LLMClient.estimate` checks a whole stage up front, later rounds included), and while it runs every
request (and in batch mode every submission) first holds what it could cost at most (its prompt and whole
``max_tokens``): one that could pass the cap is not sent, and the call raises once the calls in flight have
ended and their answers are cached. A model without a price is refused under a budget
(:class:`UnpricedModelError`).

Steps 3 to 6 are the client's mode, chosen once on construction behind one small interface
(:mod:`model_clients.modes`): sync mode (:mod:`model_clients.sync_mode`), or with ``mode="batch"`` the
provider's Batch API (:mod:`model_clients.batch_mode`): same requests, cache keys, checks and cache entries, at the batch price;
the batch ids are committed to the cache before polling, so a killed run resumes by polling them.

A failure never raises out of `run_batch`: it becomes an `LLMResult` with `ok=False`, a `status` and an
`error` (which never contains the API key), and the rest of the batch goes on.

Example (against an OpenAI-compatible server):

    >>> from model_clients import LLMClient, LLMClientConfig, LLMRequest
    >>> schema = {"type": "object", "additionalProperties": False, "required": ["phrases"],
    ...           "properties": {"phrases": {"type": "array", "items": {"type": "string"}}}}
    >>> config = LLMClientConfig(provider="openai", model="gpt-4o-mini", api_key=key,  # doctest: +SKIP
    ...                          cache_path="data/llm_cache/responses.sqlite")
    >>> with LLMClient(config) as client:  # doctest: +SKIP
    ...     results = client.run_batch([LLMRequest("object_phrases", "v1", prompt, schema=schema,
    ...                                            request_id=question_id)])
    ...     metadata = client.summary.as_metadata()
    >>> [r.data["phrases"] for r in results if r.ok]  # doctest: +SKIP
"""

from __future__ import annotations

import dataclasses
import logging
import random
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Literal, Self

from pydantic import BaseModel, Field, model_validator
from tqdm.auto import tqdm

from model_clients.answers import AnswerBook
from model_clients.batch_mode import BatchMode
from model_clients.batches import build_batch_api
from model_clients.budget import BudgetExceededError, SpendingBudget
from model_clients.cache import CachedResponse, ResponseCache, canonical_json, compute_cache_key
from model_clients.estimate import MIN_OBSERVED_ANSWERS, CostEstimate, TokenEstimator
from model_clients.modes import ModeServices, PendingWork, RequestMode
from model_clients.pricing import (
    DEFAULT_PRICE_TABLE,
    PRICE_FIELDS,
    ModelPrice,
    cost_usd,
    find_price,
    format_usd,
    undated_model_name,
)
from model_clients.providers import (
    JSON_MODES,
    PROVIDERS,
    ChatProvider,
    PermanentProviderError,
    build_provider,
)
from model_clients.ratelimit import TokenBucket, backoff_delay
from model_clients.records import LLMRequest, LLMResult, ResultStatus, TokenUsage
from model_clients.sync_mode import SyncMode

__all__ = [
    "BudgetExceededError",
    "LLMClient",
    "LLMClientConfig",
    "LLMClientSettings",
    "UnpricedModelError",
    "UsageSummary",
]

logger = logging.getLogger(__name__)

MAX_FIRST_ERRORS = 3
"""Distinct failure reasons a :class:`UsageSummary` keeps."""
MAX_ERROR_CHARS = 300


class UnpricedModelError(ValueError):
    """A budget (``max_cost_usd``) is set for a model the price table does not hold: its spend cannot be capped."""


def unpriced_model_message(model: str, budget: float) -> str:
    """The one sentence refusing an unpriced model under a budget (it names the price fields to set).

    >>> print(unpriced_model_message("o3-pro-2025-06-10", 5.0))
    model 'o3-pro-2025-06-10' has no price, so max_cost_usd $5.00 cannot cap what it spends: set price_table: {o3-pro: {input_usd_per_million: ..., output_usd_per_million: ...}} on the LLM resource (batch prices default to half), or remove max_cost_usd.
    """
    name = undated_model_name(model)
    fields = ", ".join(f"{field}: ..." for field in PRICE_FIELDS.split(", "))
    return (
        f"model {model!r} has no price, so max_cost_usd {format_usd(budget)} cannot cap what it spends: set "
        f"price_table: {{{name}: {{{fields}}}}} on the LLM resource (batch prices default to half), or remove "
        f"max_cost_usd."
    )


class LLMClientSettings(BaseModel):
    """The settings of a chat model behind the client layer, written once for both of its users.

    :class:`LLMClientConfig` (plain Python) and the Dagster resource
    :class:`assets.resources.LLMResource` both extend this model; each field's description is what the
    launchpad of ``dagster dev`` shows.

    >>> LLMClientSettings(model="gpt-4o").max_concurrency
    16
    """

    provider: str = Field(
        default="openai", description="'openai' (any OpenAI-compatible server) or 'anthropic'."
    )
    model: str = Field(
        default="gpt-4o-mini", description="Model name sent to the API; part of the cache key."
    )
    base_url: str | None = Field(
        default=None,
        description="API root, e.g. http://localhost:8000/v1 for a vLLM server; None for the vendor's.",
    )
    api_key: str | None = Field(
        default=None,
        repr=False,
        description="The key itself (on a resource, a dagster.EnvVar works too); left unset, the LLM resources "
        "read it from the environment variable their `api_key_env` names when a client is built. Never logged, "
        "cached or shown in repr.",
    )
    max_concurrency: int = Field(default=16, description="Requests in flight at once.")
    requests_per_second: float | None = Field(
        default=None, description="Sustained rate limit; None for none."
    )
    burst: int | None = Field(
        default=None, description="Requests the limiter lets out back to back; defaults to max_concurrency."
    )
    max_retries: int = Field(default=5, description="Retries of timeouts, dropped connections, 429 and 5xx.")
    invalid_json_retries: int = Field(
        default=1, description="Re-asks of an answer that is not JSON of the request's schema."
    )
    timeout_s: float = Field(default=60.0, description="Per-call timeout in seconds.")
    backoff_base_s: float = Field(
        default=1.0, description="First retry delay; doubled per retry, with jitter."
    )
    backoff_max_s: float = Field(default=60.0, description="Longest retry delay without a Retry-After hint.")
    max_retry_after_s: float = Field(
        default=120.0, description="Longest Retry-After wait honoured, in seconds."
    )
    temperature: float = Field(default=0.0, description="Default sampling temperature.")
    max_tokens: int = Field(default=1024, description="Default completion token limit.")
    image_detail: str = Field(default="auto", description="OpenAI image detail: low, high or auto.")
    json_mode: str = Field(
        default="native",
        description="'native' (JSON schema / forced tool), 'json_object' (openai) or 'prompt' (instruction only).",
    )
    strict_schema: bool = Field(default=True, description="OpenAI strict structured outputs.")
    requery_quarantined: bool = Field(
        default=False,
        description="Ask again requests whose cached answer was quarantined as invalid (pays again); by default "
        "they are returned from the cache as they are.",
    )
    mode: Literal["sync", "batch"] = Field(
        default="sync",
        description="'sync': one HTTP call per request, answers at once; 'batch': the provider's Batch API "
        "(OpenAI Batch API, Anthropic Message Batches) at the batch price (half), answers within 24 hours. Same "
        "requests, cache keys and tables either way.",
    )
    max_cost_usd: float | None = Field(
        default=None,
        ge=0.0,
        description="Budget in US dollars, a cap on what a stage spends: a stage whose upper bound (every round, "
        "every re-ask of an answer it cannot use) is above it stops before its first request, and a running stage "
        "sends no request or batch that could take the spend past it (its prompts and whole max_tokens). A model "
        "without a price is refused. None for no budget.",
    )
    batch_poll_interval_s: float = Field(
        default=30.0, gt=0.0, description="Batch mode: seconds between two polls of the submitted batches."
    )
    batch_max_requests: int | None = Field(
        default=None,
        ge=1,
        description="Batch mode: requests per batch; None for the provider's limit (OpenAI 50,000, Anthropic 100,000).",
    )
    batch_max_bytes: int | None = Field(
        default=None,
        ge=1024,
        description="Batch mode: bytes per batch; None for the provider's limit (OpenAI 200 MB, Anthropic 256 MB).",
    )
    batch_sync_reask_max: int = Field(
        default=20,
        ge=0,
        description="Batch mode: re-asks (expired, failed or invalid answers) of at most this many requests go one "
        "by one at the standard price instead of into a new batch; 0 always submits a new batch.",
    )
    batch_max_enqueued_tokens: int | None = Field(
        default=None,
        ge=1,
        description="Batch mode: prompt tokens in flight at once (the provider's enqueued-token limit of your "
        "account and model, e.g. OpenAI's batch queue limit); a batch that would pass it waits for one in flight "
        "to end. None for no limit.",
    )


class LLMClientConfig(LLMClientSettings):
    """Settings of an :class:`LLMClient`: the shared :class:`LLMClientSettings` plus what a built client needs.

    The values are checked on construction (a provider or JSON mode the adapters do not know, no worker,
    negative retries raise `ValueError`).

    >>> LLMClientConfig(provider="anthropic", model="claude-sonnet-4-20250514").default_parameters()
    {'temperature': 0.0, 'max_tokens': 1024, 'image_detail': 'auto'}
    """

    price_table: Mapping[str, ModelPrice] = Field(
        default_factory=lambda: dict(DEFAULT_PRICE_TABLE),
        description="USD per million tokens by model-name prefix.",
    )
    cache_path: str | Path | None = Field(
        default=None,
        description="SQLite file of the response cache; None keeps the cache in memory (nothing survives "
        "the process).",
    )
    seed: int | None = Field(default=None, description="Seed of the backoff jitter, for reproducible tests.")

    @model_validator(mode="after")
    def _check(self) -> Self:
        if self.provider not in PROVIDERS:
            raise ValueError(f"provider must be one of {PROVIDERS}, got {self.provider!r}")
        if self.json_mode not in JSON_MODES:
            raise ValueError(f"json_mode must be one of {JSON_MODES}, got {self.json_mode!r}")
        if self.max_concurrency < 1:
            raise ValueError(f"max_concurrency must be at least 1, got {self.max_concurrency}")
        if self.max_retries < 0 or self.invalid_json_retries < 0:
            raise ValueError("max_retries and invalid_json_retries must be >= 0")
        return self

    def default_parameters(self) -> dict[str, Any]:
        """The sampling parameters every request starts from."""
        return {
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
            "image_detail": self.image_detail,
        }


@dataclass
class UsageSummary:
    """Counters of one client's work, for asset metadata (`as_metadata()`); never holds secrets.

    `requests` counts results handed back; `api_calls` the HTTP calls made; `retries` the calls beyond
    the first of each request; `failures` the results with `ok=False`, split into `invalid_responses`,
    `transport_failures` and `rejected`, and `first_errors` keeps the first distinct reasons
    (:data:`MAX_FIRST_ERRORS`). Tokens and `cost_usd` are what this run paid; `cached_cost_usd` is what
    the answers served from the cache cost when they were first bought.

    `estimated_*` is the estimate made before sending (:mod:`model_clients.estimate`) of the requests that
    were not in the cache, to read beside what they cost. In batch mode, `batches_submitted` and
    `batch_requests` count the batches this run submitted and their requests, `batch_completed` and
    `batch_failed` the outcomes read (answers; errors and requests an expired batch never ran),
    `batch_sync_reasks` the re-asks sent one by one, `batch_waits` the waits for batches one after another
    (each a set of batches submitted together and polled until they end), and `expected_finish` the latest
    estimate of when the batches in flight end (UTC; "unknown" until some of their requests are done).
    """

    provider: str = ""
    model: str = ""
    mode: str = "sync"
    requests: int = 0
    cache_hits: int = 0
    api_calls: int = 0
    retries: int = 0
    failures: int = 0
    invalid_responses: int = 0
    transport_failures: int = 0
    rejected: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    cached_cost_usd: float = 0.0
    elapsed_s: float = 0.0
    estimated_requests: int = 0
    estimated_prompt_tokens: int = 0
    estimated_completion_tokens: int = 0
    estimated_cost_usd: float = 0.0
    batches_submitted: int = 0
    batch_requests: int = 0
    batch_completed: int = 0
    batch_failed: int = 0
    batch_sync_reasks: int = 0
    batch_waits: int = 0
    expected_finish: str = ""
    first_errors: list[str] = field(default_factory=list)

    def _note_error(self, error: str) -> None:
        if len(self.first_errors) < MAX_FIRST_ERRORS and error not in self.first_errors:
            self.first_errors.append(error)

    def add(self, result: LLMResult) -> None:
        """Count one result."""
        self.requests += 1
        if result.cached:
            self.cache_hits += 1
            self.cached_cost_usd += result.original_cost_usd
        else:
            self.api_calls += result.attempts
            self.retries += result.retries
            self.prompt_tokens += result.usage.prompt_tokens
            self.completion_tokens += result.usage.completion_tokens
            self.cost_usd += result.cost_usd
        if not result.ok:
            self.failures += 1
            self._note_error(f"{result.status}: {result.error}"[:MAX_ERROR_CHARS])
            if result.status == ResultStatus.INVALID_RESPONSE:
                self.invalid_responses += 1
            elif result.status == ResultStatus.TRANSPORT_ERROR:
                self.transport_failures += 1
            elif result.status == ResultStatus.REJECTED:
                self.rejected += 1

    def merge(self, other: UsageSummary) -> None:
        """Add another summary's counters to this one (provider, model and mode stay)."""
        for name in _SUMMARY_COUNTERS:
            setattr(self, name, getattr(self, name) + getattr(other, name))
        for error in other.first_errors:
            self._note_error(error)
        self.expected_finish = other.expected_finish or self.expected_finish

    def add_estimate(self, estimate: CostEstimate) -> None:
        """Count the estimate made before sending a batch's uncached requests."""
        self.estimated_requests += estimate.requests
        self.estimated_prompt_tokens += estimate.prompt_tokens
        self.estimated_completion_tokens += estimate.completion_tokens
        self.estimated_cost_usd += estimate.cost_usd

    @classmethod
    def from_results(cls, results: Sequence[LLMResult], provider: str = "", model: str = "") -> UsageSummary:
        """Summarise a list of results.

        Example:
            >>> UsageSummary.from_results([]).requests
            0
        """
        summary = cls(provider=provider, model=model)
        for result in results:
            summary.add(result)
        return summary

    def as_metadata(self, prefix: str = "llm_") -> dict[str, int | float | str]:
        """Flat JSON-friendly dict with `prefix` on every key, e.g. `{"llm_requests": 10, ...}`.

        Example:
            >>> UsageSummary(provider="openai", model="gpt-4o-mini", requests=2).as_metadata()["llm_requests"]
            2
        """
        values: dict[str, int | float | str] = {
            "provider": self.provider,
            "model": self.model,
            "requests": self.requests,
            "cache_hits": self.cache_hits,
            "api_calls": self.api_calls,
            "retries": self.retries,
            "failures": self.failures,
            "invalid_responses": self.invalid_responses,
            "transport_failures": self.transport_failures,
            "rejected": self.rejected,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "cost_usd": round(self.cost_usd, 6),
            "cached_cost_usd": round(self.cached_cost_usd, 6),
            "elapsed_s": round(self.elapsed_s, 3),
            "mode": self.mode,
            "estimated_requests": self.estimated_requests,
            "estimated_prompt_tokens": self.estimated_prompt_tokens,
            "estimated_completion_tokens": self.estimated_completion_tokens,
            "estimated_cost_usd": round(self.estimated_cost_usd, 6),
        }
        if self.mode == "batch":
            values.update(
                {
                    "batches_submitted": self.batches_submitted,
                    "batch_requests": self.batch_requests,
                    "batch_completed": self.batch_completed,
                    "batch_failed": self.batch_failed,
                    "batch_sync_reasks": self.batch_sync_reasks,
                    "batch_waits": self.batch_waits,
                    "expected_finish": self.expected_finish or "done",
                }
            )
        if self.first_errors:
            values["first_errors"] = " | ".join(self.first_errors)
        return {prefix + name: value for name, value in values.items()}


_SUMMARY_COUNTERS = tuple(
    item.name
    for item in fields(UsageSummary)
    if item.name not in ("provider", "model", "mode", "expected_finish", "first_errors")
)


class LLMClient:
    """Runs batches of :class:`LLMRequest` against one provider and model, with the response cache.

    Use it as a context manager (or call `close()`): it holds the HTTP connections and the cache file.

    Args:
        config (`LLMClientConfig`): the settings.
        provider (`ChatProvider`, *optional*): an adapter to use instead of the one built from `config` (sync
            mode only).
        log (`logging.Logger`, *optional*): where the estimate, the budget refusal and the batch progress are
            logged (the Dagster resource passes the run's logger); this module's logger by default.

    Attributes:
        summary (`UsageSummary`): counters over every batch this client ran.
    """

    def __init__(
        self, config: LLMClientConfig, provider: ChatProvider | None = None, log: logging.Logger | None = None
    ) -> None:
        self.config = config
        self._price = find_price(config.model, config.price_table)
        if self._price is None:
            if config.max_cost_usd is not None:
                raise UnpricedModelError(unpriced_model_message(config.model, config.max_cost_usd))
            logger.warning("no price for model %r: its cost is reported as 0", config.model)
        self._provider = provider or build_provider(
            config.provider,
            config.model,
            api_key=config.api_key,
            base_url=config.base_url,
            timeout_s=config.timeout_s,
            json_mode=config.json_mode,
            strict_schema=config.strict_schema,
        )
        secrets = (config.api_key,) if config.api_key else ()
        self._cache = ResponseCache(config.cache_path if config.cache_path is not None else ":memory:")
        self._log = log or logger
        self._budget = SpendingBudget(config.max_cost_usd, self._log)
        self._rng = random.Random(config.seed)
        self._rng_lock = threading.Lock()
        self._summary_lock = threading.Lock()
        self._estimator = TokenEstimator(config.provider, config.model, config.json_mode)
        services = ModeServices(
            config=config,
            provider=self._provider,
            cache=self._cache,
            answers=AnswerBook(self._cache, config.provider, config.model, secrets),
            budget=self._budget,
            estimator=self._estimator,
            price=self._price,
            log=self._log,
            effective_parameters=self.effective_parameters,
            request_costs=self._request_costs,
            backoff=self._backoff,
        )
        sync = SyncMode(
            services, TokenBucket(config.requests_per_second, burst=config.burst or config.max_concurrency)
        )
        self._mode: RequestMode = sync
        if config.mode == "batch":
            try:
                self._mode = BatchMode(services, build_batch_api(self._provider), sync)
            except PermanentProviderError as error:
                raise ValueError(error.reason) from None
        self.summary = UsageSummary(provider=config.provider, model=config.model, mode=config.mode)

    def __repr__(self) -> str:
        return f"LLMClient(provider={self.config.provider!r}, model={self.config.model!r})"

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the provider's connections and the cache."""
        self._provider.close()
        self._cache.close()

    @property
    def cache(self) -> ResponseCache:
        """The response cache (for inspection and maintenance)."""
        return self._cache

    def effective_parameters(self, request: LLMRequest) -> dict[str, Any]:
        """Client defaults overridden by the request's own parameters (what is sent and hashed)."""
        parameters = self.config.default_parameters()
        parameters.update(request.parameters)
        return parameters

    def cache_key(self, request: LLMRequest) -> str:
        """The cache key of `request` for this client's provider, model and settings."""
        return self._cache_keys([request])[0]

    def _cache_keys(self, requests: Sequence[LLMRequest]) -> list[str]:
        """Cache keys of a batch, serialising the default parameters and each distinct schema object once."""
        default_parameters = self.config.default_parameters()
        default_parameters_json = canonical_json(default_parameters)
        schema_texts: dict[int, tuple[Mapping[str, Any], str | None]] = {}
        keys = []
        for request in requests:
            schema_json = None
            if request.schema is not None:
                known = schema_texts.get(id(request.schema))
                if known is None:
                    # Holding the schema object keeps it alive, so its id stays unique during the batch.
                    known = (request.schema, request.schema_json)
                    schema_texts[id(request.schema)] = known
                schema_json = known[1]
            if request.parameters:
                parameters = self.effective_parameters(request)
                parameters_json = canonical_json(parameters)
            else:
                parameters, parameters_json = default_parameters, default_parameters_json
            keys.append(
                compute_cache_key(
                    self.config.provider,
                    self.config.model,
                    request,
                    parameters,
                    self.config.json_mode,
                    parameters_json=parameters_json,
                    schema_json=schema_json,
                )
            )
        return keys

    def run(self, request: LLMRequest) -> LLMResult:
        """Run one request (a batch of one, without a progress bar)."""
        return self.run_batch([request], progress=False)[0]

    def run_batch(
        self, requests: Sequence[LLMRequest], progress: bool = True, description: str | None = None
    ) -> list[LLMResult]:
        """Run `requests` and return one :class:`LLMResult` per request, in the same order.

        Cached answers come back without API calls; the others are sent concurrently, retried, validated
        and committed to the cache one by one as they arrive. Nothing raises for a bad answer or a failed
        call: check `result.ok`, and quarantine the others with `result.quarantine_row(...)`. Only the budget
        raises (:class:`BudgetExceededError`, before the request or batch that could pass ``max_cost_usd``;
        the answers received before it are in the cache).

        Args:
            requests (`Sequence[LLMRequest]`): the requests.
            progress (`bool`, *optional*, defaults to `True`): show a tqdm progress bar.
            description (`str`, *optional*): the progress bar's label (defaults to the template names).

        Returns:
            `list[LLMResult]`: aligned with `requests`.
        """
        started = time.perf_counter()
        keys = self._cache_keys(requests)
        first_index_of_key: dict[str, int] = {}
        for index, key in enumerate(keys):
            first_index_of_key.setdefault(key, index)

        results: list[LLMResult | None] = [None] * len(requests)
        cached = self._cache.get_many(first_index_of_key)
        pending: list[int] = []
        for key, index in first_index_of_key.items():
            entry = cached.get(key)
            if entry is not None and self._usable_from_cache(entry, requests[index]):
                results[index] = self._result_from_cache(entry, requests[index])
            else:
                pending.append(index)

        label = description or ", ".join(sorted({request.template_name for request in requests})) or "llm"
        estimate = self._estimate(requests, pending, cached=len(first_index_of_key) - len(pending))
        self._add_upper_bound(estimate)
        if pending:
            self._log.info("%s (%s/%s, %s mode): estimate %s", label, *self._names(), estimate.describe())
            self._check_budget(estimate, label)
        batch_counters = UsageSummary(mode=self.config.mode)
        try:
            with tqdm(
                total=len(requests), desc=label, unit="req", disable=not progress, mininterval=0.5
            ) as bar:
                bar.update(len(requests) - len(pending))
                if pending:
                    self._mode.run(PendingWork(requests, keys, pending, results, bar, label, batch_counters))
            for index, key in enumerate(keys):
                first = first_index_of_key[key]
                if index != first:
                    results[index] = self._copy_for_duplicate(results[first], requests[index])
        finally:  # a budget stop too: what was paid counts in the summary
            finished: list[LLMResult] = [result for result in results if result is not None]
            batch_summary = UsageSummary.from_results(finished, self.config.provider, self.config.model)
            batch_summary.elapsed_s = time.perf_counter() - started
            batch_summary.add_estimate(estimate)
            batch_summary.merge(batch_counters)
            with self._summary_lock:
                self.summary.merge(batch_summary)
        self._log.info(
            "%s (%s/%s, %s mode): %d requests, %d cached, %d API calls, %d retries, %d failures, %d+%d tokens, "
            "$%.4f (estimated $%.4f)",
            label,
            *self._names(),
            batch_summary.requests,
            batch_summary.cache_hits,
            batch_summary.api_calls,
            batch_summary.retries,
            batch_summary.failures,
            batch_summary.prompt_tokens,
            batch_summary.completion_tokens,
            batch_summary.cost_usd,
            batch_summary.estimated_cost_usd,
        )
        return finished

    def _names(self) -> tuple[str, str, str]:
        return self.config.provider, self.config.model, self.config.mode

    # -- cost before spending ----------------------------------------------------------------------------
    def estimate(
        self,
        requests: Sequence[LLMRequest],
        label: str | None = None,
        check_budget: bool = False,
        later: Sequence[LLMRequest] = (),
        log: bool = True,
    ) -> CostEstimate:
        """Estimate the tokens and dollars of the requests that are not in the cache, without calling a model.

        A stage that sends its requests in several calls (chunks, rounds, shards) calls this first with every
        request it knows (``requests``) and the requests its later rounds may send at most (``later``:
        pass@2's second round for every question), so that it stops before the first request when its upper
        bound is above the budget. The upper bound counts every request of every round, asked again as often
        as the client re-asks an answer it cannot use (``invalid_json_retries``; at the standard price when
        batch mode sends re-asks one by one); requests an expired batch never ran are not billed.

        Args:
            requests (`Sequence[LLMRequest]`): the requests (duplicates count once, cached ones not at all).
            label (`str`, *optional*): the stage, as the log and the budget refusal name it.
            check_budget (`bool`, *optional*): raise :class:`BudgetExceededError` when the upper bound plus what
                this client already spent is above `max_cost_usd`.
            later (`Sequence[LLMRequest]`, *optional*): the requests of later rounds, at most.
            log (`bool`, *optional*, defaults to `True`): log the estimate (a caller adding up parts logs the sum).

        Returns:
            `CostEstimate`: at the batch price in batch mode.
        """
        estimate = self._estimate_uncached(requests)
        if later:
            extra = self._estimate_uncached(later)
            estimate.later_requests = extra.requests
            estimate.later_cost_usd = extra.cost_usd
            estimate.bases.update(extra.bases)
            self._add_upper_bound(estimate, extra)
        else:
            self._add_upper_bound(estimate)
        label = label or ", ".join(sorted({request.template_name for request in requests})) or "llm"
        if log:
            self._log.info("%s (%s/%s, %s mode): estimate %s", label, *self._names(), estimate.describe())
        if check_budget:
            self._budget.stage_estimate = estimate
            self._check_budget(estimate, label)
        return estimate

    def _estimate_uncached(self, requests: Sequence[LLMRequest]) -> CostEstimate:
        keys = self._cache_keys(requests)
        first_index_of_key: dict[str, int] = {}
        for index, key in enumerate(keys):
            first_index_of_key.setdefault(key, index)
        cached = self._cache.get_many(first_index_of_key)
        pending = [
            index
            for key, index in first_index_of_key.items()
            if cached.get(key) is None or not self._usable_from_cache(cached[key], requests[index])
        ]
        return self._estimate(requests, pending, cached=len(first_index_of_key) - len(pending))

    def _completion_mean(
        self, name: str, means: dict[str, float | None], bases: dict[str, str]
    ) -> float | None:
        """The observed mean completion tokens of a prompt template (None until there are enough answers)."""
        if name not in means:
            answers, calls, tokens = self._cache.completion_stats(
                self.config.provider, self.config.model, name
            )
            if answers >= MIN_OBSERVED_ANSWERS and calls:
                means[name] = tokens / calls
                bases[name] = f"observed mean of {answers:,} answers"
            else:
                means[name] = None
                bases[name] = "max_tokens budget"
        return means[name]

    def _request_tokens(
        self, request: LLMRequest, means: dict[str, float | None], bases: dict[str, str]
    ) -> tuple[int, int]:
        """(prompt, completion) tokens estimated for one request."""
        parameters = (
            self.effective_parameters(request) if request.parameters else self.config.default_parameters()
        )
        mean = self._completion_mean(request.template_name, means, bases)
        budget = int(parameters.get("max_tokens") or self.config.max_tokens)
        completion = round(min(mean, budget)) if mean is not None else budget
        return self._estimator.prompt_tokens(request, parameters), completion

    def _estimate(self, requests: Sequence[LLMRequest], pending: Sequence[int], cached: int) -> CostEstimate:
        batch = self.config.mode == "batch"
        estimate = CostEstimate(cached=cached, batch=batch, priced=self._price is not None)
        means: dict[str, float | None] = {}
        for index in pending:
            prompt, completion = self._request_tokens(requests[index], means, estimate.bases)
            estimate.requests += 1
            estimate.prompt_tokens += prompt
            estimate.completion_tokens += completion
        estimate.completion_basis = "; ".join(
            f"{name}: {basis}" for name, basis in sorted(estimate.bases.items())
        )
        estimate.cost_usd = cost_usd(
            TokenUsage(estimate.prompt_tokens, estimate.completion_tokens), self._price, batch=batch
        )
        return estimate

    def _request_costs(
        self, requests: Sequence[LLMRequest], indices: Sequence[int], batch: bool
    ) -> dict[int, float]:
        """What each request could cost at most (its estimated prompt and its whole ``max_tokens``), held of the
        budget while it is in flight; empty without a budget."""
        if self.config.max_cost_usd is None:
            return {}
        costs = {}
        for index in indices:
            request = requests[index]
            parameters = (
                self.effective_parameters(request) if request.parameters else self.config.default_parameters()
            )
            prompt = self._estimator.prompt_tokens(request, parameters)
            completion = int(parameters.get("max_tokens") or self.config.max_tokens)
            costs[index] = cost_usd(TokenUsage(prompt, completion), self._price, batch=batch)
        return costs

    def _add_upper_bound(self, estimate: CostEstimate, later: CostEstimate | None = None) -> None:
        """Set ``upper_bound_usd``: the requests (and later rounds), each asked ``1 + invalid_json_retries`` times."""
        prompt = estimate.prompt_tokens + (later.prompt_tokens if later else 0)
        completion = estimate.completion_tokens + (later.completion_tokens if later else 0)
        batch = self.config.mode == "batch"
        once = cost_usd(TokenUsage(prompt, completion), self._price, batch=batch)
        reask_in_batch = batch and self.config.batch_sync_reask_max == 0
        reask = cost_usd(TokenUsage(prompt, completion), self._price, batch=reask_in_batch)
        estimate.upper_bound_usd = once + self.config.invalid_json_retries * reask

    def _check_budget(self, estimate: CostEstimate, label: str) -> None:
        budget = self.config.max_cost_usd
        if budget is None or not (estimate.requests or estimate.later_requests):
            return
        spent = self.spent_usd
        if spent + estimate.upper_bound_usd <= budget:
            return
        batch = self.config.mode == "batch"
        later = f" and {estimate.later_requests:,} of later rounds at most" if estimate.later_requests else ""
        already = f" on top of {format_usd(spent)} already spent" if spent else ""
        sent = (
            "nothing more was sent and the answers already paid stay in the response cache"
            if spent
            else "nothing was sent"
        )
        cheaper = " use mode: batch (half price)," if not batch else ""
        message = (
            f"{label} could cost up to {format_usd(estimate.upper_bound_usd)}{already} ({estimate.requests:,} "
            f"uncached requests{later} of {self.config.model} at the {'batch' if batch else 'standard'} price, "
            f"estimated {format_usd(estimate.cost_usd + estimate.later_cost_usd)} if every answer is usable at "
            f"the first ask), above max_cost_usd {format_usd(budget)}: {sent}; raise max_cost_usd on the LLM "
            f"resource,{cheaper} or select fewer rows."
        )
        self._log.error(message)
        raise BudgetExceededError(message, estimate, spent)

    # -- the budget while sending -------------------------------------------------------------------------
    @property
    def price(self) -> ModelPrice | None:
        """The model's price (None for a model the price table does not hold)."""
        return self._price

    @property
    def stage_estimate(self) -> CostEstimate | None:
        """The estimate the budget was last checked against before a stage's first request (None before)."""
        return self._budget.stage_estimate

    @property
    def spent_usd(self) -> float:
        """What this client has paid so far (answers received), in US dollars; counted under a budget only
        (``summary.cost_usd`` always counts it, call by call)."""
        return self._budget.spent_usd

    def budget_stop_message(self, label: str, what: str, amount: float) -> str:
        """The one sentence of a stop before `what` (which could cost up to `amount`) could pass the budget."""
        return self._budget.stop_message(label, what, amount)

    def _usable_from_cache(self, entry: CachedResponse, request: LLMRequest) -> bool:
        """A cached answer is returned as it is, except a quarantined one under `requery_quarantined` and an
        `ok` one that the request's `answer_check` refuses (cached before the check existed)."""
        if entry.status != ResultStatus.OK:
            return not self.config.requery_quarantined
        return request.answer_check is None or request.answer_check(entry.data) is None

    def _backoff(self, retry_number: int, retry_after_s: float | None) -> float:
        with self._rng_lock:
            return backoff_delay(
                retry_number,
                self.config.backoff_base_s,
                self.config.backoff_max_s,
                retry_after_s,
                self.config.max_retry_after_s,
                self._rng,
            )

    @staticmethod
    def _result_from_cache(entry: CachedResponse, request: LLMRequest) -> LLMResult:
        return LLMResult(
            ok=entry.status == ResultStatus.OK,
            status=entry.status,
            data=entry.data,
            raw_text=entry.raw_text,
            error=entry.error,
            cached=True,
            usage=entry.usage,
            attempts=0,
            cost_usd=0.0,
            original_cost_usd=entry.cost_usd,
            cache_key=entry.cache_key,
            request_id=request.request_id,
        )

    @staticmethod
    def _copy_for_duplicate(original: LLMResult | None, request: LLMRequest) -> LLMResult:
        if original is None:
            raise RuntimeError("a duplicate request has no result for its first occurrence")
        return dataclasses.replace(
            original, cached=True, attempts=0, cost_usd=0.0, request_id=request.request_id
        )
