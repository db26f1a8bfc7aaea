"""Dagster resources the assets declare: the storage root, the raw data sets, and the LLM backends.

Every field left empty falls back to the built-in sample world, so the whole graph runs on a fresh
machine with no keys, no weights and no downloads.

:class:`LLMResource` holds everything an LLM-backed asset needs to build an
:class:`~llm.client.LLMClient`: provider, model, endpoint, key, concurrency, rate limit, retries,
sampling defaults, prices and the cache location. Keys are read from the environment variable the
resource names, only when a client is built, so an offline run needs no key:

    >>> phrase_llm = LLMResource(provider="openai", model="gpt-4o-mini", api_key_env="OPENAI_API_KEY")
    >>> phrase_llm.resolved_cache_path().name
    'responses.sqlite'

Inside an asset:

    >>> @dg.asset  # doctest: +SKIP
    ... def object_phrases(llm: LLMResource, mcq_questions: pl.DataFrame) -> dg.MaterializeResult:
    ...     with llm.get_client() as client:
    ...         results = client.run_batch(build_requests(mcq_questions))
    ...         usage = client.summary.as_metadata()
    ...     ...

The response cache defaults to ``<storage root>/llm_cache/responses.sqlite`` (see
:mod:`data_contracts.storage`), resolved when the client is built, not at import.
"""

from __future__ import annotations

import os
from pathlib import Path

import dagster as dg
from pydantic import Field

from data_contracts.storage import llm_cache_path, resolve_storage_root
from llm.client import LLMClient, LLMClientConfig
from llm.pricing import DEFAULT_PRICE_TABLE, ModelPrice


class StorageResource(dg.ConfigurableResource):
    """The storage root shared by the Parquet caches, response caches, previews and the sample world."""

    root: str | None = Field(
        default=None,
        description="Storage root; default $SPATIAL_DATA_ROOT, $DAGSTER_HOME/spatial_data or ./data.",
    )

    @property
    def path(self) -> Path:
        """The resolved storage root."""
        return resolve_storage_root(self.root)


class SourcesResource(dg.ConfigurableResource):
    """Paths of the raw data sets. Empty fields read the sample world under the storage root."""

    sample_world_root: str | None = Field(
        default=None, description="Sample world folder; default <storage root>/sample_world."
    )
    omnispatial_root: str | None = Field(
        default=None, description="OmniSpatial folder holding data.json and <task_type>/ images."
    )
    omnispatial_split: str = Field(
        default="hash", description="'train', 'test', or 'hash' (stable 80/20 split by image id)."
    )
    omnispatial_test_fraction: float = Field(
        default=0.2, description="Test share when omnispatial_split is 'hash'."
    )
    spatialab_path: str | None = Field(
        default=None, description="SpatiaLab table (.json, .jsonl, .csv or .parquet)."
    )
    spatialab_images_dir: str | None = Field(
        default=None, description="SpatiaLab images folder; default images/ beside the table."
    )
    visual_genome_root: str | None = Field(
        default=None,
        description="Visual Genome folder (raw v1.4 JSON or the VG150 h5 layout) or a prompt-style Parquet file.",
    )
    visual_genome_layout: str = Field(default="auto", description="'auto', 'raw', 'vg150' or 'parquet'.")
    vg150_box_scale: int = Field(
        default=1024, description="Longer-side scale of the VG150 h5 boxes (1024 or 512)."
    )
    scannet_root: str | None = Field(
        default=None, description="ScanNet 'scans' folder with one folder per scene."
    )
    coco_instances_path: str | None = Field(
        default=None, description="COCO instances JSON with human boxes for the OmniSpatial images."
    )

    def sample_world(self, storage: StorageResource) -> Path:
        """The sample world folder."""
        return Path(self.sample_world_root) if self.sample_world_root else storage.path / "sample_world"

    def omnispatial(self, storage: StorageResource) -> Path:
        """OmniSpatial folder (the sample world's when unset)."""
        return (
            Path(self.omnispatial_root)
            if self.omnispatial_root
            else self.sample_world(storage) / "omnispatial"
        )

    def spatialab(self, storage: StorageResource) -> Path | None:
        """SpatiaLab table (the sample world's when unset and present)."""
        if self.spatialab_path:
            return Path(self.spatialab_path)
        default = self.sample_world(storage) / "spatialab" / "spatialab.json"
        return default if default.exists() or not self.omnispatial_root else None

    def visual_genome(self, storage: StorageResource) -> Path:
        """Visual Genome folder or file (the sample world's when unset)."""
        return (
            Path(self.visual_genome_root)
            if self.visual_genome_root
            else self.sample_world(storage) / "visual_genome"
        )

    def scannet(self, storage: StorageResource) -> Path:
        """ScanNet scans folder (the sample world's when unset)."""
        return (
            Path(self.scannet_root) if self.scannet_root else self.sample_world(storage) / "scannet" / "scans"
        )

    def coco_instances(self, storage: StorageResource) -> Path:
        """COCO instances file (the sample world's when unset)."""
        return (
            Path(self.coco_instances_path)
            if self.coco_instances_path
            else self.sample_world(storage) / "coco" / "instances.json"
        )

    def uses_sample_world(self) -> bool:
        """True when at least one source falls back to the sample world."""
        return not (self.omnispatial_root and self.visual_genome_root and self.scannet_root)


class ModelPriceConfig(dg.Config):
    """Price of one model (or model-name prefix), in US dollars per million tokens."""

    input_usd_per_million: float
    output_usd_per_million: float


class LLMResource(dg.ConfigurableResource):
    """A configured chat model behind the shared client layer (see `llm.client`).

    Fields mirror :class:`~llm.client.LLMClientConfig`; `price_table` entries override or add
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
        return llm_cache_path(self.storage_root)

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
