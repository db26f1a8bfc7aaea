"""The work of the STVQA shards as plain functions: picklable values in, each shard's events out.

``stvqa_candidates`` and ``stvqa_validated`` (:mod:`assets.stvqa.assets`) build the shards of a range run.
With the offline backends (no model is called) each shard is :func:`candidates_shard` or
:func:`validated_shard`, computed in the step's worker processes (:func:`assets.compute.partition_results`),
one shard per worker at a time. With a model backend, :func:`candidates_with_model` and
:func:`validated_with_model` run every shard of the run in the run's own process on one LLM client (its cache,
rate limit and budget), round by round (:func:`model_clients.rounds.run_rounds`): round ``k`` of every shard is
one call, so in batch mode the stage waits for batches once per round, whatever the number of shards. Either
way a shard's outputs, checks and metadata are built by the same function, and the asset emits them in key
order.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import dagster as dg
import polars as pl

from assets.partition_ranges import PortableEvent, portable_events
from assets.previews import draw_boxes, gallery
from assets.resources import LLMResource, llm_stage_client
from assets.stvqa import generate as generate_module
from assets.stvqa import pass_at_2 as pass_at_2_module
from assets.stvqa.generate import (
    GenerationOutput,
    QuestionGenerationSettings,
    count_by,
    generate_candidates,
    generation_task,
)
from assets.stvqa.geometry import ImageGeometry
from assets.stvqa.pass_at_2 import PassAt2Settings, PassAtTwoOutput, pass_at_2_task, run_pass_at_2
from assets.stvqa.prompts import ANSWER_PROMPT_VERSION
from assets.stvqa.shards import shard_fingerprint
from assets.tables import finalize_table, json_metadata, llm_failure_check, quarantine_output
from data_contracts import stvqa_candidates, stvqa_validated
from model_clients.rounds import run_rounds, shard_metadata

logger = logging.getLogger(__name__)

STVQA_CODE_VERSION = "2"  # 2: origin on every row
"""Code version of the STVQA assets (part of every shard's data version)."""
GENERATOR_RESOURCE_KEY = generate_module.RESOURCE_KEY
JUDGE_RESOURCE_KEY = pass_at_2_module.RESOURCE_KEY
PREVIEW_ITEMS = 3


def gt_preview(frame: pl.DataFrame, images: Mapping[str, dict[str, Any]]):
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


def candidates_shard(
    shard: str,
    rows: pl.DataFrame,
    config: QuestionGenerationSettings,
    output_settings: Mapping[str, Any],
    geometry: Mapping[str, ImageGeometry],
    geometry_source: str,
    source_file: str,
) -> list[PortableEvent]:
    """One shard of ``stvqa_candidates`` with the offline backend: its outputs and check, as :func:`portable_events`.

    ``rows`` are the shard's ``scene_graphs`` rows; ``output_settings`` the run config that shapes the rows (its
    data version).
    """
    output = generate_candidates(rows, config, geometry, None, source_file, progress=False)
    return candidates_events(
        shard, rows, config, output_settings, geometry_source, output, {"llm_cost_usd": 0.0}
    )


def candidates_with_model(
    arguments: Mapping[str, tuple],
    config: QuestionGenerationSettings,
    generator: LLMResource,
    model: str | None,
    storage_root: str | Path,
) -> dict[str, list[PortableEvent]]:
    """Every shard of ``stvqa_candidates`` with the model backend, their rounds together on one client.

    ``arguments`` are :func:`candidates_shard`'s per shard (``shard, rows, config, output_settings, geometry,
    geometry_source, source_file``); ``model`` overrides the resource's; the response cache is under
    ``storage_root`` unless the resource names one. Before the first request the budget is
    checked against every shard's requests and re-asks; a shard with too many failed requests fails the step.
    """
    with llm_stage_client(
        generator, "stvqa_candidates", True, model, GENERATOR_RESOURCE_KEY, storage_root
    ) as client:
        assert client is not None  # a stage that needs its client, given a resource, gets one
        tasks = {
            shard: generation_task(rows, config, geometry, client, source_file, progress=False)
            for shard, (_, rows, _, _, geometry, _, source_file) in arguments.items()
        }
        done = run_rounds(client, tasks, "stvqa_candidates")
        usage = {}
        for shard, result in done.items():
            usage[shard] = shard_metadata(result.summary, client)
            stage = f"stvqa_candidates shard {shard}"
            usage[shard].update(llm_failure_check(result.summary, config, stage, GENERATOR_RESOURCE_KEY))
    return {
        shard: candidates_events(
            shard, rows, config, output_settings, geometry_source, done[shard].value, usage[shard]
        )
        for shard, (_, rows, _, output_settings, _, geometry_source, _) in arguments.items()
    }


def candidates_events(
    shard: str,
    rows: pl.DataFrame,
    config: QuestionGenerationSettings,
    output_settings: Mapping[str, Any],
    geometry_source: str,
    output: GenerationOutput,
    usage: Mapping[str, Any],
) -> list[PortableEvent]:
    """The outputs and check of one ``stvqa_candidates`` shard, as :func:`portable_events`."""
    images = {row["image_id"]: row["image"] for row in rows.select("image_id", "image").iter_rows(named=True)}
    version = dg.DataVersion(
        shard_fingerprint(rows, output_settings, STVQA_CODE_VERSION, output.prompt_version, geometry_source)
    )
    checked = finalize_table(
        output.candidates,
        stvqa_candidates.StvqaCandidates,
        stvqa_candidates.CONTRACT_VERSION,
        asset_key="stvqa_candidates",
        quarantine=output.quarantine,
        record_id_column="question_id",
        preview_columns=["image_id", "category", "level", "rating", "question", "options", "answer"],
        preview_image=lambda frame: gt_preview(frame, images),
        extra_metadata={
            "shard": shard,
            "backend": config.backend,
            "prompt_version": output.prompt_version,
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
    logger.info(
        "stvqa_candidates shard %s: %d images, %d questions, %d quarantined",
        shard,
        rows.height,
        checked.frame.height,
        len(output.quarantine),
    )
    quarantine, metadata = quarantine_output(output.quarantine)
    return portable_events(
        [
            dg.Output(
                checked.frame, output_name="stvqa_candidates", metadata=checked.metadata, data_version=version
            ),
            checked.check,
            dg.Output(
                quarantine, output_name="stvqa_candidates_quarantine", metadata=metadata, data_version=version
            ),
        ]
    )


def validated_shard(
    shard: str,
    stvqa_candidates: pl.DataFrame,
    scene_rows: pl.DataFrame,
    config: PassAt2Settings,
    output_settings: Mapping[str, Any],
    geometry: Mapping[str, ImageGeometry],
    geometry_source: str,
) -> list[PortableEvent]:
    """One shard of ``stvqa_validated`` with the offline solver: its outputs and checks, as :func:`portable_events`.

    ``scene_rows`` are the ``scene_graphs`` rows of the shard's candidates' images.
    """
    output = run_pass_at_2(stvqa_candidates, scene_rows, config, geometry, None, progress=False)
    return validated_events(
        shard,
        stvqa_candidates,
        scene_rows,
        config,
        output_settings,
        geometry_source,
        output,
        {"llm_cost_usd": 0.0},
    )


def validated_with_model(
    arguments: Mapping[str, tuple],
    config: PassAt2Settings,
    judge: LLMResource,
    model: str | None,
    storage_root: str | Path,
) -> dict[str, list[PortableEvent]]:
    """Every shard of ``stvqa_validated`` with the model backend, their rounds together on one client.

    ``arguments`` are :func:`validated_shard`'s per shard; ``model`` overrides the resource's; the response cache
    is under ``storage_root`` unless the resource names one. Before the first
    request the budget is checked against both rounds of every shard (the second for every question); a shard with
    too many failed requests fails the step.
    """
    with llm_stage_client(judge, "stvqa_validated", True, model, JUDGE_RESOURCE_KEY, storage_root) as client:
        assert client is not None  # a stage that needs its client, given a resource, gets one
        tasks = {
            shard: pass_at_2_task(candidates, scene_rows, config, geometry, client, progress=False)
            for shard, (_, candidates, scene_rows, _, _, geometry, _) in arguments.items()
        }
        done = run_rounds(client, tasks, "stvqa_validated")
        usage = {}
        for shard, result in done.items():
            usage[shard] = shard_metadata(result.summary, client)
            stage = f"stvqa_validated shard {shard}"
            usage[shard].update(llm_failure_check(result.summary, config, stage, JUDGE_RESOURCE_KEY))
    return {
        shard: validated_events(
            shard,
            candidates,
            scene_rows,
            config,
            output_settings,
            geometry_source,
            done[shard].value,
            usage[shard],
        )
        for shard, (_, candidates, scene_rows, _, output_settings, _, geometry_source) in arguments.items()
    }


def _validated_metadata(
    shard: str,
    stvqa_candidates: pl.DataFrame,
    config: PassAt2Settings,
    geometry_source: str,
    output: PassAtTwoOutput,
    usage: Mapping[str, Any],
) -> dict[str, Any]:
    """The metadata of a ``stvqa_validated`` shard: its retention and its counts before and after pass@2."""
    return {
        "shard": shard,
        "backend": config.backend,
        "geometry": geometry_source,
        "pass_at_2_retention": output.stats["retention"],
        "retention_by_category": json_metadata(_retention_by_category(stvqa_candidates, output.validated)),
        "counts_before": json_metadata(
            count_by(list(stvqa_candidates.select("category", "level").iter_rows(named=True)))
        ),
        "counts_after": json_metadata(
            count_by(list(output.validated.select("category", "level").iter_rows(named=True)))
        ),
        "stats": json_metadata(output.stats),
        **usage,
    }


def validated_events(
    shard: str,
    stvqa_candidates: pl.DataFrame,
    scene_rows: pl.DataFrame,
    config: PassAt2Settings,
    output_settings: Mapping[str, Any],
    geometry_source: str,
    output: PassAtTwoOutput,
    usage: Mapping[str, Any],
) -> list[PortableEvent]:
    """The outputs and checks of one ``stvqa_validated`` shard, as :func:`portable_events`."""
    images = {
        row["image_id"]: row["image"] for row in scene_rows.select("image_id", "image").iter_rows(named=True)
    }
    version = dg.DataVersion(
        shard_fingerprint(
            scene_rows,
            output_settings,
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
        preview_image=lambda frame: gt_preview(frame, images),
        extra_metadata=_validated_metadata(shard, stvqa_candidates, config, geometry_source, output, usage),
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
    logger.info(
        "stvqa_validated shard %s: %d of %d kept (retention %.1f%%), %d quarantined",
        shard,
        validated.frame.height,
        stvqa_candidates.height,
        100 * output.stats["retention"],
        len(output.quarantine),
    )
    quarantine, metadata = quarantine_output(output.quarantine)
    return portable_events(
        [
            dg.Output(
                validated.frame,
                output_name="stvqa_validated",
                metadata=validated.metadata,
                data_version=version,
            ),
            validated.check,
            dg.Output(
                attempts.frame,
                output_name="stvqa_pass_at_2_attempts",
                metadata=attempts.metadata,
                data_version=version,
            ),
            attempts.check,
            dg.Output(
                quarantine, output_name="stvqa_validated_quarantine", metadata=metadata, data_version=version
            ),
        ]
    )
