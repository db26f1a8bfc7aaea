"""STVQA assets (group ``stvqa``): generation, pass@2 validation, and the SpatialThinker data set.

| asset | partitions | what |
|---|---|---|
| ``stvqa_candidates`` (+ ``_quarantine``) | 32 hash shards of the image ids | questions generated from ``scene_graphs`` (template or Claude), with GT scenes and count checks |
| ``stvqa_validated`` (+ ``stvqa_pass_at_2_attempts``, ``_quarantine``) | same shards | questions kept by pass@2 (GPT-4o or the scene-graph solver), every attempt stored |
| ``stvqa`` (+ ``_quarantine``) | none | balanced, split, shuffled STVQA-7K-style table; or the published STVQA-7K read from a local path |

Why shards (see :mod:`assets.stvqa.shards`): about 108K Visual Genome images are split into 32 fixed
partitions by a stable hash of the image id, so shards run in parallel, an image never moves, and a
shard whose input rows did not change reports the same data version (and is answered from the response
cache at no cost when rebuilt). The shards read only their own rows of the ``scene_graphs`` cache
(image ids first, then the shard's rows), never the whole table. ``stvqa`` reads whichever validated
shards exist, so a data set can be built before every shard has run; the shards it used are listed in
its metadata.

Resources: ``storage`` and ``sources`` (project resources), ``stvqa_generator_llm`` and
``stvqa_judge_llm`` (:class:`assets.resources.LLMResource`; only used by the ``anthropic`` and
``openai`` backends, but always bound). The bodies are thin: the work is in
:mod:`assets.stvqa.generate`, :mod:`assets.stvqa.pass_at_2` and :mod:`assets.stvqa.dataset`.
"""

import dataclasses
from collections import Counter
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import dagster as dg
import polars as pl
from pydantic import Field

from assets.partitions import stvqa_shard_partitions
from assets.previews import draw_boxes, gallery
from assets.resources import LLMResource, SourcesResource, StorageResource
from assets.stvqa.dataset import build_stvqa, read_published_stvqa
from assets.stvqa.generate import TEMPLATE_GENERATOR_VERSION, GenerationConfig, count_by, generate_candidates
from assets.stvqa.geometry import ImageGeometry, load_geometry
from assets.stvqa.pass_at_2 import PassAtTwoConfig, run_pass_at_2
from assets.stvqa.prompts import ANSWER_PROMPT_VERSION, GENERATION_PROMPT_VERSION
from assets.stvqa.shards import (
    STVQA_SHARD_KEYS,
    read_scene_graph_rows,
    read_scene_graph_shard,
    scene_graphs_path,
    shard_fingerprint,
)
from assets.tables import contract_check_specs, finalize_table, json_metadata, quarantine_output
from data_contracts import stvqa as stvqa_contract
from data_contracts import stvqa_candidates, stvqa_validated
from data_contracts.storage import table_path
from llm import LLMClient

GROUP = "stvqa"
STVQA_CODE_VERSION = "1"
GENERATOR_RESOURCE_KEY = "stvqa_generator_llm"
JUDGE_RESOURCE_KEY = "stvqa_judge_llm"
PREVIEW_ITEMS = 3


class GeometryConfigMixin(dg.Config):
    """Where metric geometry for the depth/distance/orientation questions comes from."""

    geometry: str = Field(
        default="auto",
        description="'auto' (the sample world's truth/world.json when the scene graphs are the sample world's), "
        "'none', or a path to a world.json truth file or a geometry Parquet file (see assets/stvqa/geometry.py).",
    )


class StvqaCandidatesConfig(GeometryConfigMixin):
    """Run configuration of ``stvqa_candidates``."""

    backend: str = Field(
        default="template",
        description="'template' (offline) or 'anthropic' (the stvqa_generator_llm resource).",
    )
    model: str | None = Field(
        default=None, description="Model name overriding the resource's (e.g. claude-sonnet-4-20250514)."
    )
    questions_per_image: int = Field(
        default=3, description="Questions kept (template) or asked for (LLM) per image."
    )
    seed: int = Field(
        default=0, description="Seed of the template choices (distractors, option order, ties)."
    )
    category_targets: dict[str, float] = Field(
        default_factory=dict,
        description="Target share per category; empty = 50% relation, the other eight equal.",
    )
    level_targets: dict[str, float] = Field(
        default_factory=dict, description="Target share per level; empty = 40/40/20."
    )
    chunk_size: int = Field(
        default=16, description="Images per LLM batch; the balance in the prompt is updated between batches."
    )
    max_tokens: int = Field(default=2048, description="Completion limit of a generation call.")
    send_image: bool = Field(
        default=False, description="Send the image with the scene graph to the generator."
    )
    max_per_template: int = Field(default=2, description="Template questions of one template kept per image.")

    def generation_config(self) -> GenerationConfig:
        """The plain generation settings."""
        return GenerationConfig(
            backend=self.backend,
            questions_per_image=self.questions_per_image,
            seed=self.seed,
            category_targets=self.category_targets or None,
            level_targets=self.level_targets or None,
            chunk_size=self.chunk_size,
            max_tokens=self.max_tokens,
            send_image=self.send_image,
            max_per_template=self.max_per_template,
            show_progress=False,
        )


class StvqaValidatedConfig(GeometryConfigMixin):
    """Run configuration of ``stvqa_validated``."""

    backend: str = Field(
        default="solver",
        description="'solver' (offline scene-graph solver) or 'openai' (the stvqa_judge_llm resource).",
    )
    model: str | None = Field(default=None, description="Model name overriding the resource's (e.g. gpt-4o).")
    tries_per_round: int = Field(default=2, description="Answers asked per round.")
    rounds: int = Field(default=2, description="Rounds; later rounds only for questions no try got right.")
    temperature: float = Field(
        default=1.0, description="Sampling temperature of an answer (tries should differ)."
    )
    image_detail: str = Field(default="high", description="OpenAI image detail of the answering calls.")

    def pass_at_2_config(self) -> PassAtTwoConfig:
        """The plain pass@2 settings."""
        return PassAtTwoConfig(
            backend=self.backend,
            tries_per_round=self.tries_per_round,
            rounds=self.rounds,
            temperature=self.temperature,
            image_detail=self.image_detail,
            show_progress=False,
        )


class StvqaConfig(dg.Config):
    """Run configuration of ``stvqa``."""

    source: str = Field(
        default="generated",
        description="'generated' (the validated shards) or 'published' (STVQA-7K Parquet).",
    )
    published_path: str | None = Field(
        default=None, description="Local STVQA-7K Parquet file or folder (source 'published')."
    )
    relation_share: float = Field(
        default=0.5, description="Share of relation questions; the other eight categories split the rest."
    )
    target_size: int | None = Field(
        default=None, description="Wanted number of rows; default the largest balanced set."
    )
    val_fraction: float = Field(default=0.1, description="Share of rows in the val split (split by image).")
    seed: int = Field(default=0, description="Seed of the tie-breaks, the split and the option shuffling.")


# -- helpers ----------------------------------------------------------------------------------------
def resolve_geometry(
    setting: str, sources: SourcesResource, storage: StorageResource, image_ids: list[str]
) -> tuple[Mapping[str, ImageGeometry], str]:
    """Geometry for the given images and a description of where it came from."""
    if setting == "none":
        return {}, "none"
    if setting == "auto":
        if sources.visual_genome_root:
            return {}, "none (scene graphs are not the sample world's)"
        path = sources.sample_world(storage) / "truth" / "world.json"
        if not path.exists():
            return {}, f"none ({path} does not exist)"
    else:
        path = Path(setting)
    wanted = set(image_ids)
    geometry = {image_id: objects for image_id, objects in load_geometry(path).items() if image_id in wanted}
    return geometry, str(path)


def _llm_client(resource: LLMResource, model: str | None) -> LLMClient:
    config = resource.client_config()
    if model:
        config = dataclasses.replace(config, model=model)
    return LLMClient(config)


def _gt_preview(frame: pl.DataFrame, images: Mapping[str, Mapping[str, Any]]):
    """Images of the first questions with their ground-truth boxes drawn, tiled."""
    tiles = []
    for row in frame.iter_rows(named=True):
        image = images.get(row["image_id"])
        objects = (row.get("gt_scene") or {}).get("objects") or []
        if image is None or not objects:
            continue
        tiles.append(draw_boxes(image, [obj["bbox_2d"] for obj in objects], [obj["id"] for obj in objects]))
        if len(tiles) == PREVIEW_ITEMS:
            break
    return gallery(tiles) if tiles else None


def _retention_by_category(before: pl.DataFrame, after: pl.DataFrame) -> dict[str, float]:
    totals = Counter(before["category"].cast(pl.String).to_list()) if before.height else Counter()
    kept = Counter(after["category"].cast(pl.String).to_list()) if after.height else Counter()
    return {category: round(kept[category] / total, 4) for category, total in sorted(totals.items()) if total}


# -- assets -----------------------------------------------------------------------------------------
@dg.multi_asset(
    outs={
        "stvqa_candidates": dg.AssetOut(
            description="Generated multiple-choice spatial questions per scene-graph image (9 categories, 3 levels), "
            "with the ground-truth subgraph of each question; count answers checked against the filtered scene.",
            code_version=STVQA_CODE_VERSION,
        ),
        "stvqa_candidates_quarantine": dg.AssetOut(
            description="Scene graphs (missing image, zero-area box, dangling relation), model answers (invalid JSON) "
            "and items (gold outside options, duplicate options, wrong counts) rejected during generation.",
            code_version=STVQA_CODE_VERSION,
        ),
    },
    partitions_def=stvqa_shard_partitions,
    check_specs=contract_check_specs("stvqa_candidates"),
    group_name=GROUP,
    deps=["scene_graphs"],
)
def stvqa_candidates_asset(
    context: dg.AssetExecutionContext,
    config: StvqaCandidatesConfig,
    storage: StorageResource,
    sources: SourcesResource,
    stvqa_generator_llm: LLMResource,
) -> Iterator[dg.Output | dg.AssetCheckResult]:
    """Generate STVQA questions for one shard of the scene graphs."""
    shard = context.partition_key
    rows = read_scene_graph_shard(storage.path, shard)
    geometry, geometry_source = resolve_geometry(
        config.geometry, sources, storage, rows["image_id"].to_list()
    )
    generation = config.generation_config()
    source_file = str(scene_graphs_path(storage.path))
    usage: dict[str, Any] = {"llm_cost_usd": 0.0}
    if generation.backend == "anthropic":
        with _llm_client(stvqa_generator_llm, config.model) as client:
            output = generate_candidates(rows, generation, geometry, client, source_file)
            usage = client.summary.as_metadata()
    else:
        output = generate_candidates(rows, generation, geometry, None, source_file)
    images = {row["image_id"]: row["image"] for row in rows.select("image_id", "image").iter_rows(named=True)}
    prompt_version = (
        TEMPLATE_GENERATOR_VERSION if generation.backend == "template" else GENERATION_PROMPT_VERSION
    )
    version = dg.DataVersion(
        shard_fingerprint(rows, config.model_dump(), STVQA_CODE_VERSION, prompt_version, geometry_source)
    )
    checked = finalize_table(
        output.candidates,
        stvqa_candidates.StvqaCandidates,
        stvqa_candidates.CONTRACT_VERSION,
        asset_key="stvqa_candidates",
        quarantine=output.quarantine,
        record_id_column="question_id",
        preview_columns=["image_id", "category", "level", "rating", "question", "options", "answer"],
        preview_image=lambda frame: _gt_preview(frame, images),
        extra_metadata={
            "shard": shard,
            "backend": generation.backend,
            "prompt_version": prompt_version,
            "geometry": geometry_source,
            "images": rows.height,
            "counts_generated": json_metadata(output.generated_counts),
            "counts_kept": json_metadata(
                count_by(list(output.candidates.select("category", "level").iter_rows(named=True)))
            ),
            "stats": json_metadata(output.stats),
            **usage,
        },
    )
    context.log.info(
        "stvqa_candidates shard %s: %d images, %d questions, %d quarantined",
        shard,
        rows.height,
        checked.frame.height,
        len(output.quarantine),
    )
    yield dg.Output(
        checked.frame, output_name="stvqa_candidates", metadata=checked.metadata, data_version=version
    )
    yield checked.check
    quarantine, metadata = quarantine_output(output.quarantine)
    yield dg.Output(
        quarantine, output_name="stvqa_candidates_quarantine", metadata=metadata, data_version=version
    )


@dg.multi_asset(
    ins={"stvqa_candidates": dg.AssetIn()},
    outs={
        "stvqa_validated": dg.AssetOut(
            description="Candidate questions kept by pass@2: a strong model (or the scene-graph solver) answered "
            "right in at least one of up to 2 + 2 tries.",
            code_version=STVQA_CODE_VERSION,
        ),
        "stvqa_pass_at_2_attempts": dg.AssetOut(
            description="Every pass@2 attempt (letter, raw reply, right or not, cost) for audit and re-thresholding.",
            code_version=STVQA_CODE_VERSION,
        ),
        "stvqa_validated_quarantine": dg.AssetOut(
            description="Questions that could not be answered at all (transport failures, missing scene graphs).",
            code_version=STVQA_CODE_VERSION,
        ),
    },
    partitions_def=stvqa_shard_partitions,
    check_specs=contract_check_specs("stvqa_validated", "stvqa_pass_at_2_attempts"),
    group_name=GROUP,
    deps=["scene_graphs"],
)
def stvqa_validated_asset(
    context: dg.AssetExecutionContext,
    config: StvqaValidatedConfig,
    stvqa_candidates: pl.DataFrame,
    storage: StorageResource,
    sources: SourcesResource,
    stvqa_judge_llm: LLMResource,
) -> Iterator[dg.Output | dg.AssetCheckResult]:
    """Filter one shard's candidates by pass@2."""
    shard = context.partition_key
    image_ids = sorted(set(stvqa_candidates["image_id"].to_list()))
    scene_rows = (
        read_scene_graph_rows(storage.path, image_ids)
        if image_ids
        else read_scene_graph_shard(storage.path, shard).head(0)
    )
    geometry, geometry_source = resolve_geometry(config.geometry, sources, storage, image_ids)
    pass_config = config.pass_at_2_config()
    usage: dict[str, Any] = {"llm_cost_usd": 0.0}
    if pass_config.backend == "openai":
        with _llm_client(stvqa_judge_llm, config.model) as client:
            output = run_pass_at_2(stvqa_candidates, scene_rows, pass_config, geometry, client)
            usage = client.summary.as_metadata()
    else:
        output = run_pass_at_2(stvqa_candidates, scene_rows, pass_config, geometry)
    images = {
        row["image_id"]: row["image"] for row in scene_rows.select("image_id", "image").iter_rows(named=True)
    }
    version = dg.DataVersion(
        shard_fingerprint(
            scene_rows,
            config.model_dump(),
            STVQA_CODE_VERSION,
            ANSWER_PROMPT_VERSION,
            stvqa_candidates.select("question_id", "answer", "options").sort("question_id").rows(),
            geometry_source,
        )
    )
    validated = finalize_table(
        output.validated,
        stvqa_validated.StvqaValidated,
        stvqa_validated.CONTRACT_VERSION,
        asset_key="stvqa_validated",
        quarantine=output.quarantine,
        record_id_column="question_id",
        preview_columns=[
            "image_id",
            "category",
            "level",
            "question",
            "answer",
            "pass_at_2_correct",
            "attempt_answers",
        ],
        preview_image=lambda frame: _gt_preview(frame, images),
        extra_metadata={
            "shard": shard,
            "backend": pass_config.backend,
            "geometry": geometry_source,
            "pass_at_2_retention": output.stats["retention"],
            "retention_by_category": json_metadata(
                _retention_by_category(stvqa_candidates, output.validated)
            ),
            "counts_before": json_metadata(
                count_by(list(stvqa_candidates.select("category", "level").iter_rows(named=True)))
            ),
            "counts_after": json_metadata(
                count_by(list(output.validated.select("category", "level").iter_rows(named=True)))
            ),
            "stats": json_metadata(output.stats),
            **usage,
        },
    )
    attempts = finalize_table(
        output.attempts,
        stvqa_validated.StvqaPassAtTwoAttempts,
        stvqa_validated.ATTEMPTS_CONTRACT_VERSION,
        asset_key="stvqa_pass_at_2_attempts",
        quarantine=output.quarantine,
        preview_columns=["question_id", "attempt", "round", "gold", "answer", "correct", "status"],
        extra_metadata={
            "shard": shard,
            "attempts_by_status": json_metadata(output.stats["attempts_by_status"]),
        },
    )
    context.log.info(
        "stvqa_validated shard %s: %d of %d kept (retention %.1f%%), %d quarantined",
        shard,
        validated.frame.height,
        stvqa_candidates.height,
        100 * output.stats["retention"],
        len(output.quarantine),
    )
    yield dg.Output(
        validated.frame, output_name="stvqa_validated", metadata=validated.metadata, data_version=version
    )
    yield validated.check
    yield dg.Output(
        attempts.frame,
        output_name="stvqa_pass_at_2_attempts",
        metadata=attempts.metadata,
        data_version=version,
    )
    yield attempts.check
    quarantine, metadata = quarantine_output(output.quarantine)
    yield dg.Output(
        quarantine, output_name="stvqa_validated_quarantine", metadata=metadata, data_version=version
    )


def read_validated_shards(storage_root: Path) -> tuple[pl.DataFrame, list[str]]:
    """Every materialised ``stvqa_validated`` shard under the storage root, and the shard keys found."""
    folder = table_path(storage_root, "stvqa_validated", STVQA_SHARD_KEYS[0]).parent
    shards = [key for key in STVQA_SHARD_KEYS if table_path(storage_root, "stvqa_validated", key).exists()]
    if not shards:
        raise FileNotFoundError(
            f"no stvqa_validated shard under {folder}; materialise stvqa_candidates and stvqa_validated for at least "
            "one shard, or set source='published' with published_path"
        )
    frames = [pl.read_parquet(table_path(storage_root, "stvqa_validated", key)) for key in shards]
    return pl.concat(frames, how="diagonal_relaxed"), shards


@dg.multi_asset(
    outs={
        "stvqa": dg.AssetOut(
            description="SpatialThinker training table: STVQA-7K columns (problem with the Image size line, options, "
            "answer letter and texts, category, level, rating) plus image size, GT scene and split.",
            code_version=STVQA_CODE_VERSION,
        ),
        "stvqa_quarantine": dg.AssetOut(
            description="Questions or published rows that could not become training rows, with the reason.",
            code_version=STVQA_CODE_VERSION,
        ),
    },
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
    elif config.source == "generated":
        validated, shards = read_validated_shards(storage.path)
        image_ids = sorted(set(validated["image_id"].to_list()))
        scene_rows = read_scene_graph_rows(storage.path, image_ids).select("image_id", "image")
        images = {row["image_id"]: row["image"] for row in scene_rows.iter_rows(named=True)}
        frame, log, report = build_stvqa(
            validated,
            images,
            relation_share=config.relation_share,
            target_size=config.target_size,
            val_fraction=config.val_fraction,
            seed=config.seed,
        )
        extra["shards_included"] = json_metadata(shards)
        extra["shards_missing"] = len(STVQA_SHARD_KEYS) - len(shards)
        extra["quotas"] = json_metadata(report["quotas"])
        extra["counts_before"] = json_metadata(
            count_by(list(validated.select("category", "level").iter_rows(named=True)))
        )
    else:
        raise dg.Failure(f"unknown source {config.source!r}: use 'generated' or 'published'")
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
        preview_image=lambda rows: _gt_preview(rows, images_by_id),
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
