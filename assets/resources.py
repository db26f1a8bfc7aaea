"""Dagster resources the assets declare: the storage root, the raw data sets, local workers, the LLM backends.

Every field left empty falls back to the built-in sample world, so the whole graph runs on a fresh
machine with no keys, no weights and no downloads.

:class:`LLMResource` holds everything an LLM-backed asset needs to build an
:class:`~model_clients.client.LLMClient`: provider, model, endpoint, key, concurrency, rate limit, retries,
sampling defaults, prices and the cache location. Each model-calling stage has a subclass whose defaults are
its provider, model, key variable and sampling (:class:`PhraseLLMResource`, :class:`SftReasoningLLMResource`,
:class:`StvqaGeneratorLLMResource`, :class:`StvqaJudgeLLMResource`): a run config that names the resource with
only ``mode`` or ``max_cost_usd`` replaces the fields the ``Definitions`` set, and the class defaults are what
remains, so the stage keeps its model. Keys are read from the environment variable the resource names, only
when a client is built, so an offline run needs no key:

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

import logging
import os
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal

import dagster as dg
from pydantic import Field, field_validator

from assets.compute import default_workers
from data_contracts.origin import REAL as REAL_ORIGIN
from data_contracts.origin import SAMPLE_WORLD as SAMPLE_WORLD_ORIGIN
from data_contracts.scan_datasets import ARKITSCENES, SCANNET, SCANNETPP
from data_contracts.storage import llm_cache_path, resolve_storage_root
from model_clients.client import (
    BudgetExceededError,
    LLMClient,
    LLMClientConfig,
    LLMClientSettings,
    UnpricedModelError,
)
from model_clients.pricing import DEFAULT_PRICE_TABLE, ModelPrice, format_usd
from readers.common import MissingInputError, resolve_location

logger = logging.getLogger(__name__)
PARENT_POLL_SECONDS = 1.0
_parent_watch_started = False


def stop_with_parent(poll_seconds: float = PARENT_POLL_SECONDS) -> None:
    """End this process soon after the process that started it dies (once per process).

    A step that calls paid APIs runs in a child of the run's worker process; when that worker is
    killed, the step is re-parented and would go on paying for answers nobody collects. A daemon
    thread notices the new parent and sends this process SIGTERM (then exits hard if that is ignored).
    Every answer already received is in the response cache, so the re-run pays only for the rest.
    """
    global _parent_watch_started
    if _parent_watch_started:
        return
    _parent_watch_started = True
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(poll_seconds)
        logger.error(
            "the process that started this one (pid %d) is gone: stopping before further paid calls", parent
        )
        # A process started with SIGINT ignored (`nohup ... &`) ignores SIGTERM too once Dagster has set up its
        # interrupt handlers (it gives SIGTERM SIGINT's handler): then there is nothing to wait for.
        if signal.getsignal(signal.SIGTERM) is not signal.SIG_IGN:
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(10 * poll_seconds)
        os._exit(1)

    threading.Thread(target=watch, name="stop-with-parent", daemon=True).start()


class StorageResource(dg.ConfigurableResource):
    """The storage root shared by the Parquet caches, response caches, previews and the sample world."""

    root: str | None = Field(
        default=None,
        description="Storage root; default $SPATIAL_DATA_ROOT, else $DAGSTER_HOME/spatial_data, else ./data.",
    )

    @property
    def path(self) -> Path:
        """The resolved storage root."""
        return resolve_storage_root(self.root)


class WorkersResource(dg.ConfigurableResource):
    """How many worker processes compute the partitions of a range run on this machine (`compute: local`)."""

    max_workers: int | None = Field(
        default=None,
        description="Worker processes per step for the partitions of a range run: null for one per usable core "
        "(at most 8), 1 to compute every partition in the run's own process.",
    )

    def count(self) -> int:
        """The configured number of workers, or the default (one per usable core, at most 8)."""
        if self.max_workers is not None and self.max_workers < 1:
            raise ValueError(f"max_workers must be at least 1, got {self.max_workers}")
        return self.max_workers or default_workers()


EMPTY_ALLOWED_SOURCES = ("omnispatial", "spatialab", "visual_genome")
"""The sources `SourcesResource.allow_empty_sources` can name."""


SCANNET_SCAN_FOLDERS = ("color", "depth", "pose", "intrinsic")
"""Subfolders of one ScanNet scan (SensReader export)."""


def scannet_scans_folder(root: Path) -> Path:
    """The folder holding one folder per scan: ``root``, or its ``scans/`` when ``root`` is the ScanNet dataset's
    folder (``scans/``, ``scans_test/``, the label files), so that neither partitions nor scans are named ``scans``.

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     (Path(folder) / "scans" / "scene0000_00").mkdir(parents=True)
    ...     [scannet_scans_folder(Path(folder)).name, scannet_scans_folder(Path(folder) / "scans").name]
    ['scans', 'scans']
    """
    scans = root / "scans"
    if scans.is_dir() and not any((root / name).is_dir() for name in SCANNET_SCAN_FOLDERS):
        return scans
    return root


def sample_world_remedy(unset_fields: str) -> str:
    """What to do when a source read from the built-in sample world (because no ``unset_fields`` is set) gave no
    valid row: the end of its failure's sentence, instead of asking to check a field the user never set.

    >>> sample_world_remedy("`visual_genome_root`")[:64]
    "it is the built-in sample world's (read because no `visual_genom"
    """
    return (
        f"it is the built-in sample world's (read because no {unset_fields} is set): regenerate it by "
        "materializing the `sample_world` asset with `force: true` in its run config (or with "
        "`spatial-sample-world --out <its folder>`), check the config field `sample_world_root` that chose "
        f"its folder, or set {unset_fields} to a real data set"
    )


SAMPLE_WORLD_FIELD = "sample_world_root"
"""The config field that chose the sample world's folder, named by a failure of a sample-world source."""


class SourcesResource(dg.ConfigurableResource):
    """Paths of the raw data sets. A kind of source with no path configured reads the sample world.

    Synthetic data is used only for a kind of source that has no real data set configured at all,
    never mixed into a kind that has one. The kinds:

    - multiple-choice questions (`mcq_questions`): OmniSpatial and SpatiaLab. When either
      `omnispatial_root` or `spatialab_path` is set, the sample world gives no questions: the other
      one is simply left out (its rows would be synthetic questions labelled as the real benchmark).
    - scene graphs (`scene_graphs`): `visual_genome_root`.
    - RGB-D scans (`rgbd_frames`, `rgbd_scenes`): `scannet_root`, `arkitscenes_root`, `scannetpp_root` (any of
      them, several in one build; the sample world's scans, in all three layouts, only when none is set).
    - COCO boxes of the OmniSpatial images (`coco_instances_path`): they describe the questions' images,
      so the sample world's boxes are used only while the questions are the sample world's; with real
      questions and no `coco_instances_path`, asking for them fails with one sentence.

    Every row of the source tables has an `origin` column, `sample_world` or `real`, so the two can
    always be told apart downstream.

    Every path field also takes a Hugging Face Hub dataset, `hf://datasets/OWNER/NAME[@REVISION][/PATH]`,
    fetched into the local Hub cache (only read from it with `HF_HUB_OFFLINE=1`) and read like a
    local folder; pin a revision for reproducible builds.

    A source that holds no record at all (a `data.json` holding `[]`, a 0-row Parquet file) fails its
    asset, which keeps the previous table, unless it is named in `allow_empty_sources`; a source whose
    every record was quarantined always fails.
    """

    sample_world_root: str | None = Field(
        default=None, description="Sample world folder; default <storage root>/sample_world."
    )
    omnispatial_root: str | None = Field(
        default=None,
        description="OmniSpatial folder holding data.json and <task_type>/ images (or hf://datasets/...).",
    )
    omnispatial_split: Literal["train", "test", "hash"] = Field(
        default="hash", description="'train', 'test', or 'hash' (stable 80/20 split by image id)."
    )
    omnispatial_test_fraction: float = Field(
        default=0.2, description="Test share when omnispatial_split is 'hash'."
    )
    spatialab_path: str | None = Field(
        default=None,
        description="SpatiaLab table (.json, .jsonl, .csv or .parquet) or its folder (the release: data.json + img/).",
    )
    spatialab_images_dir: str | None = Field(
        default=None, description="SpatiaLab images folder; default img/ or images/ beside the table."
    )
    visual_genome_root: str | None = Field(
        default=None,
        description="Visual Genome folder (raw v1.4 JSON or the VG150 h5 layout), or prompt-style Parquet "
        "(a file, or a folder such as a Hub snapshot with data/*.parquet).",
    )
    visual_genome_layout: Literal["auto", "raw", "vg150", "parquet"] = Field(
        default="auto", description="'auto', 'raw', 'vg150' or 'parquet'."
    )
    visual_genome_images_dir: str | None = Field(
        default=None,
        description="Visual Genome images (the images, or VG_100K/ and VG_100K_2/ inside); default beside "
        "the annotations.",
    )
    visual_genome_split: str | None = Field(
        default=None,
        description="Split label of raw-JSON and Parquet scene graphs ('train', 'val' or 'test'); default a "
        "Parquet 'split' column or file name, else 'train'. VG150 uses its h5 split array.",
    )
    scene_graph_splits: list[str] = Field(
        default_factory=lambda: ["train", "val"],
        description="Splits kept in scene_graphs; 'test' images are left out so that no training question "
        "(STVQA, DGE) is generated from them.",
    )
    vg150_box_scale: int = Field(
        default=1024, description="Longer-side scale of the VG150 h5 boxes (1024 or 512)."
    )
    scannet_root: str | None = Field(
        default=None,
        description="ScanNet 'scans' folder with one folder per scene, or the dataset's folder that holds 'scans/'.",
    )
    arkitscenes_root: str | None = Field(
        default=None,
        description="ARKitScenes '3dod' folder: Training/ and Validation/ (one folder per video) and metadata.csv.",
    )
    scannetpp_root: str | None = Field(
        default=None,
        description="ScanNet++ folder holding data/ (one folder per scene, the iPhone stream extracted with the "
        "toolkit) and splits/.",
    )
    coco_instances_path: str | None = Field(
        default=None, description="COCO instances JSON with human boxes for the OmniSpatial images."
    )
    allow_empty_sources: list[str] = Field(
        default_factory=list,
        description="Sources that may hold no record ('omnispatial', 'spatialab', 'visual_genome'): their "
        "asset then writes an empty table. By default a source with no record fails its asset, naming the "
        "input, and the previous table is kept, so a file emptied by mistake never empties the tables "
        "built from it.",
    )

    @field_validator("allow_empty_sources")
    @classmethod
    def _known_sources(cls, names: list[str]) -> list[str]:
        unknown = [name for name in names if name not in EMPTY_ALLOWED_SOURCES]
        if unknown:
            raise ValueError(
                f"allow_empty_sources: unknown sources {unknown}; known: {list(EMPTY_ALLOWED_SOURCES)}"
            )
        return names

    def allows_empty(self, source: str) -> bool:
        """True when ``source`` is named in `allow_empty_sources`."""
        return source in self.allow_empty_sources

    @staticmethod
    def allow_empty_switch(source: str) -> str:
        """The words that tell a user how to let ``source`` be empty (the end of an empty source's failure).

        >>> SourcesResource.allow_empty_switch("spatialab")
        "add 'spatialab' to the config field `allow_empty_sources`"
        """
        return f"add {source!r} to the config field `allow_empty_sources`"

    def sample_world(self, storage: StorageResource) -> Path:
        """The sample world folder."""
        return Path(self.sample_world_root) if self.sample_world_root else storage.path / "sample_world"

    def real_questions(self) -> bool:
        """True when a real multiple-choice source (OmniSpatial or SpatiaLab) is configured."""
        return bool(self.omnispatial_root or self.spatialab_path)

    def questions_origin(self) -> str:
        """``origin`` of the rows of ``mcq_questions``: ``real`` or ``sample_world``."""
        return REAL_ORIGIN if self.real_questions() else SAMPLE_WORLD_ORIGIN

    def scene_graphs_origin(self) -> str:
        """``origin`` of the rows of ``scene_graphs``."""
        return REAL_ORIGIN if self.visual_genome_root else SAMPLE_WORLD_ORIGIN

    def real_scans(self) -> bool:
        """True when a real scan data set (ScanNet, ARKitScenes or ScanNet++) is configured."""
        return bool(self.scannet_root or self.arkitscenes_root or self.scannetpp_root)

    def scans_origin(self) -> str:
        """``origin`` of the rows of ``rgbd_frames`` and ``rgbd_scenes``."""
        return REAL_ORIGIN if self.real_scans() else SAMPLE_WORLD_ORIGIN

    def omnispatial(self, storage: StorageResource) -> Path | None:
        """OmniSpatial folder; the sample world's when no real question source is configured, else None
        when `omnispatial_root` is unset."""
        if self.omnispatial_root:
            return resolve_location(self.omnispatial_root, "omnispatial_root")
        if self.real_questions():
            return None
        return self.sample_world(storage) / "omnispatial"

    def spatialab(self, storage: StorageResource) -> Path | None:
        """SpatiaLab table or folder; the sample world's when no real question source is configured, else
        None when `spatialab_path` is unset."""
        if self.spatialab_path:
            return resolve_location(self.spatialab_path, "spatialab_path")
        if self.real_questions():
            return None
        return self.sample_world(storage) / "spatialab" / "spatialab.json"

    def spatialab_images(self) -> Path | None:
        """SpatiaLab images folder when set (else the reader looks beside the table)."""
        if self.spatialab_images_dir:
            return resolve_location(self.spatialab_images_dir, "spatialab_images_dir")
        return None

    def visual_genome(self, storage: StorageResource) -> Path:
        """Visual Genome folder or file (the sample world's when unset)."""
        if self.visual_genome_root:
            return resolve_location(self.visual_genome_root, "visual_genome_root")
        return self.sample_world(storage) / "visual_genome"

    def visual_genome_images(self) -> Path | None:
        """Visual Genome images folder when set (else the reader looks beside the annotations)."""
        if self.visual_genome_images_dir:
            return resolve_location(self.visual_genome_images_dir, "visual_genome_images_dir")
        return None

    def scan_roots(self, storage: StorageResource) -> dict[str, Path]:
        """The root of each configured scan data set, by data set (``scannet``, ``arkitscenes``, ``scannetpp``);
        when none is configured, the sample world's three layouts."""
        if not self.real_scans():
            world = self.sample_world(storage)
            return {
                SCANNET: world / "scannet" / "scans",
                ARKITSCENES: world / "arkitscenes" / "3dod",
                SCANNETPP: world / "scannetpp",
            }
        configured = {
            SCANNET: (self.scannet_root, "scannet_root"),
            ARKITSCENES: (self.arkitscenes_root, "arkitscenes_root"),
            SCANNETPP: (self.scannetpp_root, "scannetpp_root"),
        }
        roots = {
            dataset: resolve_location(location, field)
            for dataset, (location, field) in configured.items()
            if location
        }
        if SCANNET in roots:  # scannet_root may name the scans' folder or the dataset's folder above it
            roots[SCANNET] = scannet_scans_folder(roots[SCANNET])
        return roots

    def coco_instances(self, storage: StorageResource) -> Path:
        """COCO instances file (the sample world's when unset and the questions are the sample world's).

        Raises:
            MissingInputError: with real questions and no `coco_instances_path` (the sample world's
                boxes describe only its own images).
        """
        if self.coco_instances_path:
            return resolve_location(self.coco_instances_path, "coco_instances_path")
        if self.real_questions():
            raise MissingInputError(
                "the questions come from a real data set but `coco_instances_path` is not set: the sample "
                "world's COCO boxes describe only its own images; set `coco_instances_path` to the COCO "
                "instances JSON of the OmniSpatial images, or use another grounding backend"
            )
        return self.sample_world(storage) / "coco" / "instances.json"

    def raw_inputs(self, storage: StorageResource) -> dict[str, list[Path]]:
        """The raw paths each source asset reads, by asset: what its data version fingerprints.

        SpatiaLab counts by its folder (the table's folder when a table file is configured), and a
        configured images folder counts with its source.
        """
        spatialab = self.spatialab(storage)
        spatialab_inputs = (
            [] if spatialab is None else [spatialab if spatialab.is_dir() else spatialab.parent]
        )
        omnispatial = self.omnispatial(storage)
        return {
            "mcq_questions": [path for path in [omnispatial] if path is not None]
            + spatialab_inputs
            + [path for path in [self.spatialab_images()] if path is not None],
            "scene_graphs": [self.visual_genome(storage)]
            + [path for path in [self.visual_genome_images()] if path is not None],
            "rgbd_frames": list(self.scan_roots(storage).values()),
        }

    def uses_sample_world(self) -> bool:
        """True when at least one kind of source falls back to the sample world."""
        return not (self.real_questions() and self.visual_genome_root and self.real_scans())


class ModelPriceConfig(dg.Config):
    """Price of one model (or model-name prefix), in US dollars per million tokens."""

    input_usd_per_million: float = Field(description="Standard (sync) price of prompt tokens.")
    output_usd_per_million: float = Field(description="Standard (sync) price of completion tokens.")
    batch_input_usd_per_million: float | None = Field(
        default=None, description="Batch API price of prompt tokens; default half the standard price."
    )
    batch_output_usd_per_million: float | None = Field(
        default=None, description="Batch API price of completion tokens; default half the standard price."
    )


class LLMResource(dg.ConfigurableResource, LLMClientSettings):
    """A configured chat model behind the shared client layer (see `model_clients.client`).

    The model, endpoint, key, concurrency, retry and sampling fields are those of
    `LLMClientSettings` (written once there); the resource adds where the key and the
    response cache come from and price overrides. `price_table` entries override or add to the
    defaults (gpt-4o-mini, gpt-4o, claude-sonnet-4).
    """

    api_key_env: str | None = Field(
        default=None,
        description="Environment variable holding the key, read only when a client is built and `api_key` is "
        "unset, so a run on an offline backend needs no key (e.g. 'OPENAI_API_KEY').",
    )
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
        description="Storage root for the default cache path; defaults to the run's storage resource "
        "($SPATIAL_DATA_ROOT, else $DAGSTER_HOME/spatial_data, else ./data).",
    )

    def resolved_cache_path(self, storage_root: str | Path | None = None) -> Path:
        """Where the response cache lives: `cache_path`, else under `storage_root` (the field, else the argument:
        the run's ``storage`` resource, which a run config naming this resource leaves in place)."""
        if self.cache_path:
            return Path(self.cache_path)
        return llm_cache_path(self.storage_root or storage_root)

    def client_config(self, storage_root: str | Path | None = None) -> LLMClientConfig:
        """The :class:`LLMClientConfig` these fields describe; the key is read from `api_key_env` here."""
        prices = dict(DEFAULT_PRICE_TABLE)
        for name, price in self.price_table.items():
            prices[name] = ModelPrice(
                price.input_usd_per_million,
                price.output_usd_per_million,
                price.batch_input_usd_per_million,
                price.batch_output_usd_per_million,
            )
        shared = {name: getattr(self, name) for name in LLMClientSettings.model_fields}
        shared["api_key"] = self.api_key or (os.environ.get(self.api_key_env) if self.api_key_env else None)
        return LLMClientConfig(
            **shared, price_table=prices, cache_path=self.resolved_cache_path(storage_root)
        )

    def get_client(self, model: str | None = None, storage_root: str | Path | None = None) -> LLMClient:
        """A new :class:`LLMClient` (`model` overriding the resource's; its cache under `storage_root` unless the
        resource names one); use it as a context manager so connections and the cache are closed.

        The process stops with its parent (:func:`stop_with_parent`), so a killed run's steps stop paying. The
        client logs its estimate, budget refusal and batch progress to the Dagster logger, so they show in the
        run's log.
        """
        stop_with_parent()
        config = self.client_config(storage_root)
        if model:
            config = config.model_copy(update={"model": model})
        return LLMClient(config, log=dg.get_dagster_logger("model_clients"))


def _role_field(name: str, default: object) -> Any:
    """A field of :class:`LLMResource` with a stage's default (the description stays the shared one)."""
    field = LLMResource.model_fields[name]
    return Field(default=default, description=field.description)


class PhraseLLMResource(LLMResource):
    """phrase_llm: object phrases of the SpatialCORE questions (OpenAI GPT-4o-mini by default)."""

    provider: str = _role_field("provider", "openai")
    model: str = _role_field("model", "gpt-4o-mini")
    api_key_env: str | None = _role_field("api_key_env", "OPENAI_API_KEY")


class SftReasoningLLMResource(LLMResource):
    """sft_reasoning_llm: reasoning traces of the SFT cold-start set (OpenAI GPT-4o-mini by default)."""

    provider: str = _role_field("provider", "openai")
    model: str = _role_field("model", "gpt-4o-mini")
    api_key_env: str | None = _role_field("api_key_env", "OPENAI_API_KEY")


class StvqaGeneratorLLMResource(LLMResource):
    """stvqa_generator_llm: STVQA question generation (Claude Sonnet 4 at temperature 0 by default)."""

    provider: str = _role_field("provider", "anthropic")
    model: str = _role_field("model", "claude-sonnet-4-20250514")
    api_key_env: str | None = _role_field("api_key_env", "ANTHROPIC_API_KEY")
    max_concurrency: int = _role_field("max_concurrency", 8)
    temperature: float = _role_field("temperature", 0.0)
    max_tokens: int = _role_field("max_tokens", 2048)


class StvqaJudgeLLMResource(LLMResource):
    """stvqa_judge_llm: pass@2 answers (GPT-4o, images at high detail, temperature 1, one letter, by default)."""

    provider: str = _role_field("provider", "openai")
    model: str = _role_field("model", "gpt-4o")
    api_key_env: str | None = _role_field("api_key_env", "OPENAI_API_KEY")
    image_detail: str = _role_field("image_detail", "high")
    temperature: float = _role_field("temperature", 1.0)
    max_tokens: int = _role_field("max_tokens", 5)


LLM_RESOURCES: dict[str, type[LLMResource]] = {
    "phrase_llm": PhraseLLMResource,
    "sft_reasoning_llm": SftReasoningLLMResource,
    "stvqa_generator_llm": StvqaGeneratorLLMResource,
    "stvqa_judge_llm": StvqaJudgeLLMResource,
}
"""The LLM resource of each model-calling stage, by resource key."""


def describe_llm(resource: LLMResource, model: str | None = None) -> str:
    """What a stage's LLM resource will call, for the log: provider/model, mode and budget.

    >>> describe_llm(StvqaGeneratorLLMResource(mode="batch", max_cost_usd=600))
    'anthropic/claude-sonnet-4-20250514 (batch mode, max_cost_usd $600.00)'
    """
    budget = (
        f", max_cost_usd {format_usd(resource.max_cost_usd)}" if resource.max_cost_usd is not None else ""
    )
    return f"{resource.provider}/{model or resource.model} ({resource.mode} mode{budget})"


@contextmanager
def llm_stage_client(
    resource: LLMResource | None,
    stage: str,
    needed: bool = True,
    model: str | None = None,
    resource_key: str | None = None,
    storage_root: str | Path | None = None,
) -> Iterator[LLMClient | None]:
    """The client of a paid stage (None when its backend calls no model); a budget refusal fails the step.

    The client's response cache is under `storage_root` (the run's ``storage`` resource) unless the resource names
    one. The log names the provider and model the stage calls. When the stage's spend could pass the resource's
    ``max_cost_usd`` the client refuses before the request or batch
    (:class:`~model_clients.client.BudgetExceededError`), and a budget on a model without a price is refused;
    here either becomes a ``dagster.Failure`` whose description is the refusal's one sentence (naming the
    resource) and whose metadata is the estimate.
    """
    if not needed or resource is None:
        yield None
        return
    name = resource_key or "LLM"
    dg.get_dagster_logger("model_clients").info(
        "%s: %s resource calls %s", stage, name, describe_llm(resource, model)
    )
    try:
        client = resource.get_client(model, storage_root)
    except UnpricedModelError as error:
        raise dg.Failure(description=f"{stage}: {_named(str(error), resource_key)}") from None
    with client:
        try:
            yield client
        except BudgetExceededError as error:
            raise budget_failure(stage, error, resource_key) from None


def _named(message: str, resource_key: str | None) -> str:
    """A message naming the resource where it says "the LLM resource"."""
    return message.replace("the LLM resource", f"the {resource_key} resource") if resource_key else message


def budget_failure(stage: str, error: BudgetExceededError, resource_key: str | None = None) -> dg.Failure:
    """The step failure of a budget refusal: its sentence, and what was spent and estimated as metadata."""
    estimate = error.estimate
    message = _named(str(error), resource_key)
    return dg.Failure(
        description=message if message.startswith(f"{stage} ") else f"{stage}: {message}",
        metadata={
            "llm_spent_usd": round(error.spent_usd, 6),
            "llm_estimated_requests": estimate.requests + estimate.later_requests,
            "llm_estimated_prompt_tokens": estimate.prompt_tokens,
            "llm_estimated_completion_tokens": estimate.completion_tokens,
            "llm_estimated_cost_usd": round(estimate.cost_usd + estimate.later_cost_usd, 6),
            "llm_upper_bound_usd": round(estimate.upper_bound_usd, 6),
        },
    )
