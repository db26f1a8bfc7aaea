"""STVQA assets (group ``stvqa``): generation, pass@2 validation, and the SpatialThinker data set.

| asset | partitions | what |
|---|---|---|
| ``stvqa_candidates`` (+ ``_quarantine``) | 32 hash shards of the image ids | questions generated from ``scene_graphs`` (template or Claude), with GT scenes and count checks |
| ``stvqa_validated`` (+ ``stvqa_pass_at_2_attempts``, ``_quarantine``) | same shards | questions kept by pass@2 (GPT-4o or the scene-graph solver), every attempt stored |
| ``stvqa`` (+ ``_quarantine``) | none | balanced, split, shuffled STVQA-7K-style table; or the published STVQA-7K read from a local path |

Why shards (see :mod:`assets.stvqa.shards`): about 108K Visual Genome images are split into 32 fixed
partitions by a stable hash of the image id, so shards run in parallel, an image never moves, and a
shard whose input rows did not change reports the same data version (and is answered from the response
cache at no cost when rebuilt).

Upstream tables come only through Dagster and the IO manager: the shards take ``scene_graphs`` (and
``stvqa_validated`` its shard of ``stvqa_candidates``) as inputs and pick their rows out of it. The
IO manager loads the whole ``scene_graphs`` table (image bytes included) for every shard; the selection
functions of :mod:`assets.stvqa.shards` also take a ``polars.LazyFrame``, which would read only the
shard's rows if the IO manager handed one out. ``stvqa``
loads what its ``source`` needs (``context.load_asset_value``): with ``generated``, every
``stvqa_validated`` shard that has been materialised (so a data set can be built before every shard
has run; the shards it used are listed in its metadata) and the images from ``scene_graphs``; with
``published``, nothing upstream.

Run configs extend the settings models of the plain modules (each setting written once, there):
``stvqa_candidates`` :class:`~assets.stvqa.generate.QuestionGenerationSettings`, ``stvqa_validated``
:class:`~assets.stvqa.pass_at_2.PassAt2Settings`, ``stvqa``
:class:`~assets.stvqa.dataset.StvqaDatasetSettings`; only the asset's own knobs (geometry, model
override, source) are added here.

Resources: ``storage`` and ``sources`` (project resources), ``stvqa_generator_llm`` and
``stvqa_judge_llm`` (:class:`assets.resources.LLMResource`; only used by the ``anthropic`` and
``openai`` backends, but always bound). The bodies are thin: the work is in
:mod:`assets.stvqa.generate`, :mod:`assets.stvqa.pass_at_2` and :mod:`assets.stvqa.dataset`. With a model
backend every shard of a run shares one client in the run's process and the shards' rounds go out together
(:mod:`assets.stvqa.work`): in batch mode the stage waits for batches once per round, whatever the number of
shards, and its budget is checked once against every shard.

A shard that calls a model fails (``dagster.Failure``, one sentence: what failed, the first errors, how
to re-run) when more than its ``max_failure_fraction`` of the requests failed (endpoint down, bad key,
garbage answers; :mod:`model_clients.failures`), so an empty or tiny table never materialises green and feeds
``stvqa``; below the threshold the failed rows are quarantined and the counts go into the metadata.
"""

import functools
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import dagster as dg
import polars as pl
from pydantic import Field

from assets.compute import partition_results
from assets.partition_ranges import (
    SINGLE_RUN,
    PartitionFiles,
    PortableEvent,
    TableFile,
    read_partition,
    restore_events,
    run_partitions,
)
from assets.partitions import LLM_POOL, stvqa_shard_partitions
from assets.provenance import table_file_plans
from assets.resources import LLMResource, SourcesResource, StorageResource, WorkersResource
from assets.stvqa.dataset import StvqaDatasetSettings, build_stvqa, read_published_stvqa
from assets.stvqa.generate import QuestionGenerationSettings, count_by
from assets.stvqa.geometry import ImageGeometry, load_geometry
from assets.stvqa.pass_at_2 import PassAt2Settings
from assets.stvqa.shards import STVQA_SHARD_KEYS, read_image_rows, read_shard_rows
from assets.stvqa.work import (
    GENERATOR_RESOURCE_KEY,
    JUDGE_RESOURCE_KEY,
    STVQA_CODE_VERSION,
    candidates_shard,
    candidates_with_model,
    gt_preview,
    validated_shard,
    validated_with_model,
)
from assets.tables import (
    contract_check_specs,
    finalize_table,
    json_metadata,
    quarantine_output,
    table_and_quarantine_outs,
    upstream_table_location,
)
from data_contracts import stvqa as stvqa_contract
from data_contracts.storage import table_path

GROUP = "stvqa"


class GeometryConfigMixin(dg.Config):
    """Where metric geometry for the depth/distance/orientation questions comes from."""

    geometry: str = Field(
        default="auto",
        description="'auto' (the sample world's truth/world.json when the scene graphs are the sample world's), "
        "'none', or a path to a world.json truth file or a geometry Parquet file (see assets/stvqa/geometry.py).",
    )


class StvqaCandidatesConfig(GeometryConfigMixin, QuestionGenerationSettings):
    """Run configuration of ``stvqa_candidates``: the generation settings, the geometry and a model override."""

    model: str | None = Field(
        default=None, description="Model name overriding the resource's (e.g. claude-sonnet-4-20250514)."
    )


class StvqaValidatedConfig(GeometryConfigMixin, PassAt2Settings):
    """Run configuration of ``stvqa_validated``: the pass@2 settings, the geometry and a model override."""

    model: str | None = Field(default=None, description="Model name overriding the resource's (e.g. gpt-4o).")


class StvqaConfig(dg.Config, StvqaDatasetSettings):
    """Run configuration of ``stvqa``: where the rows come from, and the data set settings."""

    source: Literal["generated", "published"] = Field(
        default="generated",
        description="'generated' (the validated shards) or 'published' (STVQA-7K Parquet).",
    )
    published_path: str | None = Field(
        default=None, description="Local STVQA-7K Parquet file or folder (source 'published')."
    )


# -- helpers ----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class GeometrySource:
    """Where the metric geometry of the images comes from (picklable: a shard's worker loads it)."""

    path: str | None
    description: str

    def for_images(self, image_ids: Iterable[str]) -> Mapping[str, ImageGeometry]:
        """The geometry of the given images (none when there is no source)."""
        if self.path is None:
            return {}
        stat = Path(self.path).stat()
        every_image = _load_geometry_cached(self.path, stat.st_mtime_ns, stat.st_size)
        return {image_id: every_image[image_id] for image_id in image_ids if image_id in every_image}


def geometry_source(setting: str, sources: SourcesResource, storage: StorageResource) -> GeometrySource:
    """Where the geometry of the ``geometry`` setting comes from, and a description of it."""
    if setting == "none":
        return GeometrySource(None, "none")
    if setting == "auto":
        if sources.visual_genome_root:
            return GeometrySource(None, "none (scene graphs are not the sample world's)")
        path = sources.sample_world(storage) / "truth" / "world.json"
        if not path.exists():
            return GeometrySource(None, f"none ({path} does not exist)")
        return GeometrySource(str(path), str(path))
    return GeometrySource(setting, setting)


def resolve_geometry(
    setting: str, sources: SourcesResource, storage: StorageResource, image_ids: list[str]
) -> tuple[Mapping[str, ImageGeometry], str]:
    """Geometry for the given images and a description of where it came from."""
    source = geometry_source(setting, sources, storage)
    return source.for_images(image_ids), source.description


@functools.lru_cache(maxsize=4)
def _load_geometry_cached(path: str, mtime_ns: int, size: int) -> Mapping[str, ImageGeometry]:
    """:func:`load_geometry` of ``path``, read once per version of the file (every shard of a run reads it)."""
    return load_geometry(path)


def candidates_arguments(
    shard: str, scene_graphs_file: Path, geometry: GeometrySource, *arguments: Any
) -> tuple:
    """:func:`assets.stvqa.work.candidates_shard`'s arguments of one shard, its ``scene_graphs`` rows read from the
    table's file (only the shard's row groups)."""
    rows = read_shard_rows(scene_graphs_file, shard)
    settings, output_settings, source_file = arguments
    geometry_map = geometry.for_images(rows["image_id"].to_list())
    return (shard, rows, settings, output_settings, geometry_map, geometry.description, source_file)


def candidates_shard_from_file(*arguments: Any) -> list[PortableEvent]:
    """:func:`assets.stvqa.work.candidates_shard` of one shard (:func:`candidates_arguments`), its rows read where
    the shard runs: no shard's rows pass through the run's process."""
    return candidates_shard(*candidates_arguments(*arguments))


def validated_arguments(
    shard: str, candidates_file: Path, scene_graphs_file: Path, geometry: GeometrySource, *arguments: Any
) -> tuple:
    """:func:`assets.stvqa.work.validated_shard`'s arguments of one shard, its candidates and the ``scene_graphs``
    rows of their images read from their files."""
    candidates = read_partition(candidates_file)
    image_ids = sorted(set(candidates["image_id"].to_list()))
    settings, output_settings = arguments
    scene_rows = read_image_rows(scene_graphs_file, image_ids)
    return (
        shard,
        candidates,
        scene_rows,
        settings,
        output_settings,
        geometry.for_images(image_ids),
        geometry.description,
    )


def validated_shard_from_file(*arguments: Any) -> list[PortableEvent]:
    """:func:`assets.stvqa.work.validated_shard` of one shard (:func:`validated_arguments`), its inputs read where
    the shard runs."""
    return validated_shard(*validated_arguments(*arguments))


def _output_settings(config: dg.Config) -> dict[str, Any]:
    """The settings that shape a shard's rows (its data version): all but the failure threshold, which only
    decides whether the shard materialises."""
    return config.model_dump(exclude={"max_failure_fraction"})


# -- assets -----------------------------------------------------------------------------------------
@dg.multi_asset(
    outs=table_and_quarantine_outs(
        "stvqa_candidates",
        "Generated multiple-choice spatial questions per scene-graph image (9 categories, 3 levels), with the "
        "ground-truth subgraph of each question; count answers checked against the filtered scene.",
        STVQA_CODE_VERSION,
        quarantine_description="Scene graphs (missing image, zero-area box, dangling relation), model answers "
        "(invalid JSON) and items (gold outside options, duplicate options, wrong counts) rejected during generation.",
    ),
    ins={"scene_graphs": dg.AssetIn()},
    partitions_def=stvqa_shard_partitions,
    check_specs=contract_check_specs("stvqa_candidates"),
    group_name=GROUP,
    pool=LLM_POOL,
    backfill_policy=SINGLE_RUN,
)
def stvqa_candidates_asset(
    context: dg.AssetExecutionContext,
    config: StvqaCandidatesConfig,
    storage: StorageResource,
    sources: SourcesResource,
    workers: WorkersResource,
    stvqa_generator_llm: LLMResource,
    scene_graphs: TableFile,
) -> Iterator[dg.Output | dg.AssetCheckResult]:
    """Generate STVQA questions for each shard of the scene graphs (offline: the shards of a range run in the
    step's worker processes, see :mod:`assets.stvqa.work`; each reads only its shard's rows)."""
    source_file = upstream_table_location(context, "scene_graphs")
    settings = QuestionGenerationSettings.model_validate(
        config.model_dump(include=set(QuestionGenerationSettings.model_fields))
    )
    geometry = geometry_source(config.geometry, sources, storage)
    arguments = {
        shard: (
            shard,
            scene_graphs,
            geometry,
            settings,
            _output_settings(config),
            source_file,
        )
        for shard in context.partition_keys
    }
    plans = table_file_plans(context, storage.path)
    if config.calls_model:  # every shard on one client in this process, round by round (one wait per round)
        model_arguments = {shard: candidates_arguments(*values) for shard, values in arguments.items()}
        events = candidates_with_model(
            model_arguments, settings, stvqa_generator_llm, config.model, storage.path
        )
        yield from run_partitions(context, lambda shard: restore_events(events[shard]), plans)
        return
    with partition_results(candidates_shard_from_file, arguments, workers.count()) as result:
        yield from run_partitions(context, lambda shard: restore_events(result(shard)), plans)


@dg.multi_asset(
    ins={"stvqa_candidates": dg.AssetIn(), "scene_graphs": dg.AssetIn()},
    outs={
        **table_and_quarantine_outs(
            "stvqa_validated",
            "Candidate questions kept by pass@2: a strong model (or the scene-graph solver) answered right in at "
            "least one of up to 2 + 2 tries.",
            STVQA_CODE_VERSION,
            quarantine_description="Questions that got no answer letter at all (transport failures, refusals, "
            "replies that are no option letter after the re-asks, missing "
            "scene graphs).",
        ),
        "stvqa_pass_at_2_attempts": dg.AssetOut(
            description="Every pass@2 attempt (letter, raw reply, right or not, cost) for audit and re-thresholding.",
            code_version=STVQA_CODE_VERSION,
        ),
    },
    partitions_def=stvqa_shard_partitions,
    check_specs=contract_check_specs("stvqa_validated", "stvqa_pass_at_2_attempts"),
    group_name=GROUP,
    pool=LLM_POOL,
    backfill_policy=SINGLE_RUN,
)
def stvqa_validated_asset(
    context: dg.AssetExecutionContext,
    config: StvqaValidatedConfig,
    stvqa_candidates: PartitionFiles,
    scene_graphs: TableFile,
    storage: StorageResource,
    sources: SourcesResource,
    workers: WorkersResource,
    stvqa_judge_llm: LLMResource,
) -> Iterator[dg.Output | dg.AssetCheckResult]:
    """Filter each shard's candidates by pass@2 (offline: the shards of a range run in worker processes)."""
    settings = PassAt2Settings.model_validate(config.model_dump(include=set(PassAt2Settings.model_fields)))
    geometry = geometry_source(config.geometry, sources, storage)
    arguments = {
        shard: (
            shard,
            stvqa_candidates[shard],
            scene_graphs,
            geometry,
            settings,
            _output_settings(config),
        )
        for shard in context.partition_keys
    }
    plans = table_file_plans(context, storage.path)
    if config.calls_model:  # every shard on one client in this process, round by round (one wait per round)
        model_arguments = {shard: validated_arguments(*values) for shard, values in arguments.items()}
        events = validated_with_model(model_arguments, settings, stvqa_judge_llm, config.model, storage.path)
        yield from run_partitions(context, lambda shard: restore_events(events[shard]), plans)
        return
    with partition_results(validated_shard_from_file, arguments, workers.count()) as result:
        yield from run_partitions(context, lambda shard: restore_events(result(shard)), plans)


def load_validated_shards(
    context: dg.AssetExecutionContext, storage_root: str | Path | None = None
) -> tuple[pl.DataFrame, list[str]]:
    """Every materialised ``stvqa_validated`` shard (loaded by its IO manager), and the shard keys found.

    The job must hold the ``stvqa_validated`` definition (the project's ``Definitions`` do), so that
    Dagster loads through its IO manager rather than a default one. When every shard's file is under
    ``storage_root``, they are loaded with one call (each call builds its own input context, about
    0.3 s, 32 times over); otherwise shard by shard, skipping the missing ones.
    """
    key = dg.AssetKey("stvqa_validated")
    if storage_root is not None and all(
        table_path(storage_root, "stvqa_validated", shard).is_file() for shard in STVQA_SHARD_KEYS
    ):
        return context.load_asset_value(key), list(STVQA_SHARD_KEYS)  # the IO manager reads every file
    frames, shards = [], []
    for shard in STVQA_SHARD_KEYS:
        try:
            frames.append(context.load_asset_value(key, partition_key=shard))
        except FileNotFoundError:  # the IO manager holds nothing for a shard that has not run yet
            continue
        shards.append(shard)
    if not shards:
        raise FileNotFoundError(
            "no stvqa_validated shard is materialised; materialise stvqa_candidates and stvqa_validated for at "
            "least one shard, or set source='published' with published_path"
        )
    return pl.concat(frames, how="diagonal_relaxed"), shards


@dg.multi_asset(
    outs=table_and_quarantine_outs(
        "stvqa",
        "SpatialThinker training table: STVQA-7K columns (problem with the Image size line, options, answer letter "
        "and texts, category, level, rating) plus image size, GT scene and split.",
        STVQA_CODE_VERSION,
        quarantine_description="Questions or published rows that could not become training rows, with the reason.",
    ),
    check_specs=contract_check_specs("stvqa"),
    group_name=GROUP,
    deps=["stvqa_validated", "scene_graphs"],
)
def stvqa_asset(
    context: dg.AssetExecutionContext, config: StvqaConfig, storage: StorageResource
) -> Iterator[dg.Output | dg.AssetCheckResult]:
    """Balance (50% relation), split 90/10 by image, shuffle options stably; or read the published STVQA-7K."""
    extra: dict[str, Any] = {"source": config.source}
    if config.source == "published":
        if not config.published_path:
            raise dg.Failure(
                "source 'published' needs published_path (a local STVQA-7K Parquet file or folder)"
            )
        frame, log, report = read_published_stvqa(config.published_path)
        extra["published_files"] = json_metadata(report["files"])
        extra["gt_objects_dropped"] = report["gt_objects_dropped"]
    else:
        validated, shards = load_validated_shards(context, storage.path)
        scene_graphs = table_path(storage.path, "scene_graphs")
        scene_rows = read_image_rows(scene_graphs, validated["image_id"].to_list()).select(
            "image_id", "image"
        )
        images = {row["image_id"]: row["image"] for row in scene_rows.iter_rows(named=True)}
        frame, log, report = build_stvqa(validated, images, config)
        extra["shards_included"] = json_metadata(shards)
        extra["shards_missing"] = len(STVQA_SHARD_KEYS) - len(shards)
        extra["quotas"] = json_metadata(report["quotas"])
        extra["counts_before"] = json_metadata(
            count_by(list(validated.select("category", "level").iter_rows(named=True)))
        )
    images_by_id = {
        row["image_id"]: row["images"][0]
        for row in frame.head(20).select("image_id", "images").iter_rows(named=True)
    }
    checked = finalize_table(
        frame,
        stvqa_contract.Stvqa,
        stvqa_contract.CONTRACT_VERSION,
        asset_key="stvqa",
        quarantine=log,
        record_id_column="image_id",
        preview_columns=[
            "image_id",
            "category",
            "level",
            "rating",
            "question_only",
            "options",
            "answer_option_text",
            "split",
        ],
        preview_image=lambda rows: gt_preview(rows, images_by_id),
        storage_root=storage.path,
        extra_metadata={
            **extra,
            "counts_after": json_metadata(
                count_by(list(frame.select("category", "level").iter_rows(named=True)))
            ),
            "rows_by_split": json_metadata(dict(Counter(frame["split"].cast(pl.String).to_list()))),
            "answer_letters": json_metadata(dict(sorted(Counter(frame["answer"].to_list()).items()))),
        },
    )
    context.log.info("stvqa: %d rows (%s), %d quarantined", checked.frame.height, config.source, len(log))
    yield dg.Output(checked.frame, output_name="stvqa", metadata=checked.metadata)
    yield checked.check
    quarantine, metadata = quarantine_output(log)
    yield dg.Output(quarantine, output_name="stvqa_quarantine", metadata=metadata)


STVQA_ASSETS = [stvqa_candidates_asset, stvqa_validated_asset, stvqa_asset]
"""The STVQA assets, for the project's ``Definitions``."""

__all__ = [
    "GENERATOR_RESOURCE_KEY",
    "JUDGE_RESOURCE_KEY",
    "STVQA_ASSETS",
    "StvqaCandidatesConfig",
    "StvqaConfig",
    "StvqaValidatedConfig",
    "stvqa_asset",
    "stvqa_candidates_asset",
    "stvqa_shard_partitions",
    "stvqa_validated_asset",
]
