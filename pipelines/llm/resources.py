"""Dagster resources for the LLM client layer.

:class:`LLMResource` is a `ConfigurableResource` holding everything an LLM-backed asset needs to
build an :class:`~pipelines.llm.client.LLMClient`: provider, model, endpoint, key, concurrency, rate
limit, retries, sampling defaults, prices and the cache location. Bind keys with `dagster.EnvVar`
so they are read at run time, shown in the UI only by name, and never written to metadata:

    >>> import dagster as dg
    >>> phrase_llm = LLMResource(provider="openai", model="gpt-4o-mini",  # doctest: +SKIP
    ...                          api_key=dg.EnvVar("OPENAI_API_KEY"))
    >>> stvqa_generator = LLMResource(provider="anthropic", model="claude-sonnet-4-20250514",  # doctest: +SKIP
    ...                               api_key=dg.EnvVar("ANTHROPIC_API_KEY"), max_concurrency=8)

Inside an asset:

    >>> @dg.asset  # doctest: +SKIP
    ... def object_phrases(llm: LLMResource, mcq_questions: pl.DataFrame) -> dg.MaterializeResult:
    ...     with llm.get_client() as client:
    ...         results = client.run_batch(build_requests(mcq_questions))
    ...         usage = client.summary.as_metadata()
    ...     ...

The response cache defaults to `<storage_root>/llm_cache/responses.sqlite`, the storage root being
`storage_root` if set, else `$SPATIAL_DATA_ROOT`, else `./data` (resolved when the client is built,
not at import).
"""

from __future__ import annotations

import os
from pathlib import Path

import dagster as dg
from pydantic import Field

from pipelines.llm.client import LLMClient, LLMClientConfig
from pipelines.llm.pricing import DEFAULT_PRICE_TABLE, ModelPrice

__all__ = ["CACHE_RELATIVE_PATH", "LLMResource", "ModelPriceConfig", "default_storage_root"]

CACHE_RELATIVE_PATH = Path("llm_cache") / "responses.sqlite"


def default_storage_root() -> Path:
    """`$SPATIAL_DATA_ROOT` if set, else `./data`.

    Example:
        >>> isinstance(default_storage_root(), Path)
        True
    """
    return Path(os.environ.get("SPATIAL_DATA_ROOT") or "data")


class ModelPriceConfig(dg.Config):
    """Price of one model (or model-name prefix), in US dollars per million tokens."""

    input_usd_per_million: float
    output_usd_per_million: float


class LLMResource(dg.ConfigurableResource):
    """A configured chat model behind the shared client layer (see `pipelines.llm.client`).

    Fields mirror :class:`~pipelines.llm.client.LLMClientConfig`; `price_table` entries override or add
    to the defaults (gpt-4o-mini, gpt-4o, claude-sonnet-4).
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
        description="Bind with dagster.EnvVar('OPENAI_API_KEY') / EnvVar('ANTHROPIC_API_KEY'); never logged or stored.",
    )
    api_key_env: str | None = Field(
        default=None,
        description="Environment variable holding the key, read only when a client is built and `api_key` is "
        "unset, so a run on an offline backend needs no key (e.g. 'OPENAI_API_KEY').",
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
        default=1, description="Re-asks of an answer that does not fit the schema."
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
    price_table: dict[str, ModelPriceConfig] = Field(
        default_factory=dict,
        description="USD per million tokens by model-name prefix, merged over the defaults.",
    )
    cache_path: str | None = Field(
        default=None,
        description="Response cache file; defaults to <storage_root>/llm_cache/responses.sqlite.",
    )
    storage_root: str | None = Field(
        default=None,
        description="Storage root for the default cache path; defaults to $SPATIAL_DATA_ROOT or ./data.",
    )
    requery_quarantined: bool = Field(
        default=False, description="Ask again requests whose cached answer was quarantined (pays again)."
    )

    def resolved_cache_path(self) -> Path:
        """Where the response cache lives."""
        if self.cache_path:
            return Path(self.cache_path)
        root = Path(self.storage_root) if self.storage_root else default_storage_root()
        return root / CACHE_RELATIVE_PATH

    def client_config(self) -> LLMClientConfig:
        """The :class:`LLMClientConfig` these fields describe."""
        prices = dict(DEFAULT_PRICE_TABLE)
        for name, price in self.price_table.items():
            prices[name] = ModelPrice(price.input_usd_per_million, price.output_usd_per_million)
        return LLMClientConfig(
            provider=self.provider,
            model=self.model,
            base_url=self.base_url,
            api_key=self.api_key or (os.environ.get(self.api_key_env) if self.api_key_env else None),
            max_concurrency=self.max_concurrency,
            requests_per_second=self.requests_per_second,
            burst=self.burst,
            max_retries=self.max_retries,
            invalid_json_retries=self.invalid_json_retries,
            timeout_s=self.timeout_s,
            backoff_base_s=self.backoff_base_s,
            backoff_max_s=self.backoff_max_s,
            max_retry_after_s=self.max_retry_after_s,
            temperature=self.temperature,
            max_tokens=self.max_tokens,
            image_detail=self.image_detail,
            json_mode=self.json_mode,
            strict_schema=self.strict_schema,
            price_table=prices,
            cache_path=self.resolved_cache_path(),
            requery_quarantined=self.requery_quarantined,
        )

    def get_client(self) -> LLMClient:
        """A new :class:`LLMClient`; use it as a context manager so connections and the cache are closed."""
        return LLMClient(self.client_config())
