"""Grounding assets (group ``grounding``): SpatialCORE's pseudo-GT and training tables.

| asset | partitions | contents |
|---|---|---|
| ``object_phrases`` | - | physical objects and persons per question (LLM or spaCy/rules), filtered |
| ``pseudo_gt_boxes`` | static shards ``shard-00``..``shard-07`` | boxes with validity (Grounding DINO or human boxes) |
| ``spatialcore_train`` | - | OmniSpatial questions + pseudo-GT, the reward's columns; coverage as appendix A.3 |
| ``spatialcore_train_corrupted`` | - | the same with a fraction of boxes removed, relabelled or displaced |
| ``pseudo_gt_audit`` | - | N random samples' boxes exported for manual review (pictures + verdicts.csv) |
| ``pseudo_gt_audit_precision`` | - | precision per confidence bin from the reviewer's verdicts (Figure 6) |
| ``sft_cold_start`` | - | 1,000 training samples with target completions for the SFT cold start |

Each writes a ``<asset>_quarantine`` table and carries a blocking contract check. The work is in the
plain functions of this package; the bodies here read resources and config, call them, and report.

Run configs extend the settings models of the plain modules (each setting written once, there) and
add only the asset's own knobs (which questions, where the review files go).

Resources: ``storage``, ``sources``, and two LLM resources of the client layer,
``phrase_llm`` (object phrases, `backend: openai`) and ``sft_reasoning_llm`` (cold-start traces,
`reasoning: llm`); the offline defaults never call them. An asset that calls a model fails
(``dagster.Failure``, one sentence: what failed, the first errors, how to re-run) when more than its
``max_failure_fraction`` of the requests failed (:mod:`model_clients.failures`); below that the failed rows are
quarantined and the counts go into the metadata.

Running order: ``pseudo_gt_boxes`` is partitioned, so a full build runs the unpartitioned assets up to
``object_phrases``, then every shard (on one machine or several), then the assets downstream of it.
"""

import logging
import time
from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager
from pathlib import Path

import dagster as dg
import polars as pl
from pydantic import Field

from assets.compute import compute_settings, partition_results
from assets.grounding import audit as audit_module
from assets.grounding import cold_start as cold_start_module
from assets.grounding import phrases as phrases_module
from assets.grounding.annotations import CocoInstances
from assets.grounding.cold_start import REASONING_PROMPT_VERSION, ColdStartSettings, build_cold_start
from assets.grounding.corruption import CorruptionSettings, corrupt_pseudo_gt
from assets.grounding.coverage import (
    coverage_counts,
    gallery_image,
    histogram_image,
    validity_histogram,
    validity_values,
)
from assets.grounding.phrases import (
    PHRASES_PROMPT_VERSION,
    RULES_VERSION,
    PhraseSettings,
    extract_object_phrases,
)
from assets.grounding.pseudo_gt import PseudoGtSettings, build_pseudo_gt
from assets.grounding.shards import shard_of
from assets.grounding.training_table import (
    SpatialcoreTrainSettings,
    build_spatialcore_train,
    select_training_questions,
)
from assets.partition_ranges import (
    SINGLE_RUN,
    PortableEvent,
    TableFile,
    portable_events,
    read_table_columns,
    restore_events,
    run_partitions,
)
from assets.partitions import DETECTOR_POOL, LLM_POOL, grounding_shard_partitions
from assets.previews import markdown_image, save_preview
from assets.provenance import TableFilePlan, table_file_plans, write_outputs
from assets.resources import LLMResource, SourcesResource, StorageResource, llm_stage_client
from assets.tables import (
    StreamedTable,
    contract_check_specs,
    finalize_table,
    json_metadata,
    llm_failure_check,
    quarantine_output,
    table_and_quarantine_outs,
)
from data_contracts import object_phrases as object_phrases_contract
from data_contracts import pseudo_gt_audit as audit_contract
from data_contracts import pseudo_gt_boxes as pseudo_gt_contract
from data_contracts import sft_cold_start as sft_contract
from data_contracts import spatialcore_train as train_contract
from data_contracts.image_store import embed_images
from data_contracts.quarantine import QuarantineLog
from data_contracts.storage import WrittenTable
from data_contracts.validation import polars_schema
from model_clients import LLMClient

GROUP = "grounding"
logger = logging.getLogger(__name__)

GROUNDING_CODE_VERSION = "1"
"""The shards of ``pseudo_gt_boxes`` (see :mod:`assets.grounding.shards`)."""


def _image_metadata(image, name: str, storage: StorageResource) -> dict:
    if image is None:
        return {}
    return {
        name: dg.MetadataValue.md(markdown_image(image, alt=name)),
        f"{name}_path": dg.MetadataValue.path(str(save_preview(image, storage.path, name))),
    }


def _llm_client(
    resource: LLMResource, needed: bool, stage: str, resource_key: str, storage: StorageResource
) -> AbstractContextManager[LLMClient | None]:
    """A client of the resource when the backend calls a model, else None (its cache under the storage root); the
    log names its provider and model, and a request that could pass the resource's ``max_cost_usd`` fails the
    stage before it is sent (:func:`assets.resources.llm_stage_client`)."""
    return llm_stage_client(resource, stage, needed, resource_key=resource_key, storage_root=storage.path)


def _coverage_metadata(report, values, prefix: str = "") -> dict:
    histogram = validity_histogram(values)
    return {
        f"{prefix}samples": report.samples,
        f"{prefix}localizable_samples": report.localizable,
        f"{prefix}samples_with_queries": report.with_queries,
        f"{prefix}samples_with_valid_box": report.with_valid_box,
        f"{prefix}boxes": report.boxes,
        f"{prefix}coverage_of_localizable": round(report.coverage_of_localizable, 4),
        f"{prefix}coverage_of_queried": round(report.coverage_of_queried, 4),
        f"{prefix}coverage": dg.MetadataValue.md(report.markdown()),
        f"{prefix}validity_histogram": json_metadata(histogram),
        f"{prefix}mean_validity": round(float(values.mean()), 4) if len(values) else 0.0,
    }


# --------------------------------------------------------------------------------------------------
# object_phrases
# --------------------------------------------------------------------------------------------------
class ObjectPhrasesConfig(dg.Config, PhraseSettings):
    """Run configuration of ``object_phrases``: which questions, and the phrase settings."""

    sources: list[str] = Field(
        default=["omnispatial"], description="Question sources to extract phrases for."
    )
    splits: list[str] = Field(default=["train"], description="Splits to extract phrases for (empty: all).")


@dg.multi_asset(
    outs=table_and_quarantine_outs(
        "object_phrases",
        "The physical objects and persons each training question refers to, filtered to boxable phrases.",
        code_version=f"{GROUNDING_CODE_VERSION}-prompt-{PHRASES_PROMPT_VERSION}-rules-{RULES_VERSION}",
    ),
    check_specs=contract_check_specs("object_phrases"),
    group_name=GROUP,
    pool=LLM_POOL,
)
def object_phrases_asset(
    context: dg.AssetExecutionContext,
    config: ObjectPhrasesConfig,
    phrase_llm: LLMResource,
    storage: StorageResource,
    mcq_questions: pl.DataFrame,
    mcq_images: TableFile,
) -> Iterator[dg.Output | dg.AssetCheckResult]:
    """Extract object phrases with the configured backend; one shared filter for every backend."""
    questions = select_training_questions(mcq_questions, config.sources, config.splits or None)
    if config.calls_model and config.send_image:
        questions = embed_images(questions, mcq_images)
    started = time.perf_counter()
    with _llm_client(
        phrase_llm, config.calls_model, "object_phrases", phrases_module.RESOURCE_KEY, storage
    ) as client:
        extraction = extract_object_phrases(questions, config, llm_client=client)
        usage = client.summary.as_metadata() if client is not None else {}
        usage.update(llm_failure_check(client, config, "object_phrases", phrases_module.RESOURCE_KEY))
    frame = extraction.frame
    with_phrases = int((frame["phrases"].list.len() > 0).sum()) if frame.height else 0
    checked = finalize_table(
        frame,
        object_phrases_contract.ObjectPhrases,
        object_phrases_contract.CONTRACT_VERSION,
        asset_key="object_phrases",
        quarantine=extraction.quarantine,
        preview_columns=["question_id", "task_type", "skipped", "phrases", "extracted_phrases"],
        extra_metadata={
            "backend": config.backend,
            "extractor": extraction.extractor,
            "questions": questions.height,
            "skipped_task_types": json_metadata(config.skip_task_types),
            "skipped": int(frame["skipped"].sum()) if frame.height else 0,
            "with_phrases": with_phrases,
            "phrases": int(frame["phrases"].list.len().sum() or 0) if frame.height else 0,
            "dropped_by_reason": json_metadata(extraction.drop_reasons),
            "most_dropped_terms": json_metadata(extraction.dropped_terms),
            "seconds": round(time.perf_counter() - started, 3),
            **usage,
        },
    )
    context.log.info(
        "object_phrases: %d questions, %d with phrases, %d quarantined",
        frame.height,
        with_phrases,
        len(extraction.quarantine),
    )
    yield dg.Output(checked.frame, output_name="object_phrases", metadata=checked.metadata)
    yield checked.check
    quarantine, metadata = quarantine_output(extraction.quarantine)
    yield dg.Output(quarantine, output_name="object_phrases_quarantine", metadata=metadata)


# --------------------------------------------------------------------------------------------------
# pseudo_gt_boxes
# --------------------------------------------------------------------------------------------------
class PseudoGtBoxesConfig(dg.Config, PseudoGtSettings):
    """Run configuration of ``pseudo_gt_boxes``: the grounding backend and the detector settings."""


def _shard_preview(frame: pl.DataFrame, questions: pl.DataFrame):
    with_images = frame.select("question_id", "pseudo_gt").join(
        questions.select("question_id", "image"), on="question_id", how="inner"
    )
    return gallery_image(with_images)


@dg.multi_asset(
    outs=table_and_quarantine_outs(
        "pseudo_gt_boxes",
        "Pseudo-GT boxes with validity for each question's phrases, one file per shard.",
        GROUNDING_CODE_VERSION,
    ),
    check_specs=contract_check_specs("pseudo_gt_boxes"),
    partitions_def=grounding_shard_partitions,
    group_name=GROUP,
    pool=DETECTOR_POOL,
    backfill_policy=SINGLE_RUN,
)
def pseudo_gt_boxes_asset(
    context: dg.AssetExecutionContext,
    config: PseudoGtBoxesConfig,
    sources: SourcesResource,
    storage: StorageResource,
    mcq_questions: pl.DataFrame,
    mcq_images: TableFile,
    object_phrases: pl.DataFrame,
) -> Iterator[dg.Output | dg.AssetCheckResult]:
    """Ground the phrases of each shard's questions with the configured backend (``compute: ray``: one Ray
    task per shard, each loading its own detector and reading its questions' images)."""
    settings = PseudoGtSettings.model_validate(config.model_dump(include=set(PseudoGtSettings.model_fields)))
    shards = object_phrases["question_id"].map_elements(shard_of, return_dtype=pl.String)
    plans = table_file_plans(context, storage.path)
    arguments = {}
    for shard in context.partition_keys:
        phrases = object_phrases.filter(shards == shard)
        questions = mcq_questions.filter(pl.col("question_id").is_in(phrases["question_id"].implode()))
        coco = None
        if config.backend == "annotations" and phrases.height:
            coco = (sources.coco_instances(storage), sources.omnispatial(storage))
        arguments[shard] = (shard, questions, mcq_images, phrases, settings, coco, storage.path, plans)
    # A detector per process: locally the shards run one after another in the run's process.
    with partition_results(pseudo_gt_boxes_shard, arguments, 1, compute_settings(config)) as result:
        yield from run_partitions(context, lambda shard: restore_events(result(shard)), plans)


def pseudo_gt_boxes_shard(
    shard: str,
    questions: pl.DataFrame,
    images: Path,
    phrases: pl.DataFrame,
    config: PseudoGtSettings,
    coco_paths: tuple[Path, Path | None] | None,
    storage_path: Path,
    plans: Mapping[str, TableFilePlan],
) -> list[PortableEvent]:
    """One shard of ``pseudo_gt_boxes``: its files written, its events as :func:`portable_events`.
    ``questions`` are its ``mcq_questions`` rows (their images read here from ``images``, the ``mcq_images``
    file), ``phrases`` its ``object_phrases`` rows, ``coco_paths`` the COCO instances file and the images'
    root (annotations backend)."""
    if "image" not in questions.columns:
        questions = embed_images(questions, images)
    coco = CocoInstances.load(coco_paths[0], images_root=coco_paths[1]) if coco_paths is not None else None
    started = time.perf_counter()
    frame, log = build_pseudo_gt(questions, phrases, shard, config, coco=coco)
    seconds = time.perf_counter() - started
    report = coverage_counts(phrases, frame)
    values = validity_values(frame)
    queried = int((frame["phrases"].list.len() > 0).sum()) if frame.height else 0
    checked = finalize_table(
        frame,
        pseudo_gt_contract.PseudoGtBoxes,
        pseudo_gt_contract.CONTRACT_VERSION,
        asset_key="pseudo_gt_boxes",
        quarantine=log,
        preview_columns=["question_id", "phrases", "pseudo_gt", "unmatched_phrases"],
        preview_image=lambda valid: _shard_preview(valid, questions),
        storage_root=storage_path,
        partition_key=shard,
        extra_metadata={
            "shard": shard,
            "backend": config.backend,
            "detector": config.model
            if config.backend == "grounding_dino"
            else str(coco.path if coco else ""),
            "box_threshold": config.box_threshold,
            "text_threshold": config.text_threshold,
            "seconds": round(seconds, 3),
            "queried_images_per_second": round(queried / seconds, 3) if seconds > 0 else 0.0,
            **_coverage_metadata(report, values),
        },
    )
    logger.info(
        "pseudo_gt_boxes %s: %d rows, %d with boxes, %d quarantined",
        shard,
        frame.height,
        report.with_valid_box,
        len(log),
    )
    quarantine, metadata = quarantine_output(log)
    events = [
        dg.Output(checked.frame, output_name="pseudo_gt_boxes", metadata=checked.metadata),
        checked.check,
        dg.Output(quarantine, output_name="pseudo_gt_boxes_quarantine", metadata=metadata),
    ]
    return portable_events(write_outputs(events, plans, shard))


# --------------------------------------------------------------------------------------------------
# spatialcore_train and its corrupted variant
# --------------------------------------------------------------------------------------------------
class SpatialcoreTrainConfig(dg.Config, SpatialcoreTrainSettings):
    """Run configuration of ``spatialcore_train``: which questions, and the size of the preview gallery."""

    gallery_size: int = Field(default=6, description="Previews with boxes drawn in the metadata.")


@dg.multi_asset(
    outs=table_and_quarantine_outs(
        "spatialcore_train",
        "OmniSpatial questions with their pseudo-GT: the SpatialCORE reward's columns.",
        GROUNDING_CODE_VERSION,
    ),
    check_specs=contract_check_specs("spatialcore_train"),
    group_name=GROUP,
)
def spatialcore_train_asset(
    context: dg.AssetExecutionContext,
    config: SpatialcoreTrainConfig,
    storage: StorageResource,
    mcq_questions: pl.DataFrame,
    mcq_images: TableFile,
    object_phrases: pl.DataFrame,
    pseudo_gt_boxes: pl.DataFrame,
) -> Iterator[dg.Output | dg.AssetCheckResult]:
    """Join the questions with the pseudo-GT of every shard; report coverage as the paper's appendix A.3. The
    table is loaded alone by the trainer, so each row embeds its image (written a batch at a time)."""
    frame = build_spatialcore_train(mcq_questions, pseudo_gt_boxes, config)
    report = coverage_counts(object_phrases, pseudo_gt_boxes)
    values = validity_values(pseudo_gt_boxes)
    log = QuarantineLog("spatialcore_train")
    written, metadata, check = write_with_images(
        frame,
        mcq_images,
        table_file_plans(context, storage.path)["spatialcore_train"],
        StreamedTable(
            train_contract.SpatialcoreTrain,
            train_contract.CONTRACT_VERSION,
            asset_key="spatialcore_train",
            quarantine=log,
            preview_columns=[
                "question_id",
                "question",
                "options",
                "answer",
                "task_type",
                "pseudo_gt",
                "split",
            ],
            preview_image=lambda valid: gallery_image(valid, count=config.gallery_size),
            storage_root=storage.path,
            preview_rows=PREVIEW_ROWS,
        ),
        {
            "rows_with_pseudo_gt": int((frame["pseudo_gt"].list.len() > 0).sum()) if frame.height else 0,
            "rows_by_split": json_metadata(
                {str(k): int(v) for k, v in frame.group_by("split").len().iter_rows()} if frame.height else {}
            ),
            **_coverage_metadata(report, values),
            **_image_metadata(
                histogram_image(validity_histogram(values)), "validity_histogram_plot", storage
            ),
        },
    )
    context.log.info(
        "spatialcore_train: %d rows; %d of %d localisable samples have a valid box (%.1f%%)",
        written.rows,
        report.with_valid_box,
        report.localizable,
        100 * report.coverage_of_localizable,
    )
    yield dg.Output(written, output_name="spatialcore_train", metadata=metadata)
    yield check
    quarantine, metadata = quarantine_output(log)
    yield dg.Output(quarantine, output_name="spatialcore_train_quarantine", metadata=metadata)


PREVIEW_ROWS = 256
"""Rows of a streamed training table its preview gallery chooses from."""
EMBED_BATCH_ROWS = 256
"""Rows whose images are read and written at a time."""


def write_with_images(
    frame: pl.DataFrame, images: Path, plan: TableFilePlan, table: StreamedTable, extra_metadata: dict
) -> tuple[WrittenTable, dict, dg.AssetCheckResult]:
    """Write ``frame``'s rows with their images embedded (read from the ``mcq_images`` file ``images``), checked
    by ``table``, a batch at a time: the written file, its metadata and its contract check."""
    schema = polars_schema(table.contract)
    with plan.writer(None, schema, table.contract_version) as out:
        for batch in frame.iter_slices(EMBED_BATCH_ROWS):
            out.write(table.check(embed_images(batch, images)))
    metadata, check = table.finish(extra_metadata)
    return plan.written(None), metadata, check


class CorruptionConfig(dg.Config, CorruptionSettings):
    """Run configuration of ``spatialcore_train_corrupted``: the corruption settings."""


@dg.multi_asset(
    outs=table_and_quarantine_outs(
        "spatialcore_train_corrupted",
        "spatialcore_train with a fraction of pseudo-GT boxes removed, relabelled or displaced (robustness study).",
        GROUNDING_CODE_VERSION,
    ),
    check_specs=contract_check_specs("spatialcore_train_corrupted"),
    group_name=GROUP,
)
def spatialcore_train_corrupted_asset(
    context: dg.AssetExecutionContext,
    config: CorruptionConfig,
    storage: StorageResource,
    spatialcore_train: TableFile,
    mcq_images: TableFile,
) -> Iterator[dg.Output | dg.AssetCheckResult]:
    """Corrupt the configured fraction of boxes (seeded); the rows are read without their images, which are
    embedded again as the table is written."""
    columns = [name for name in polars_schema(train_contract.SpatialcoreTrain) if name != "image"]
    frame, stats = corrupt_pseudo_gt(read_table_columns(spatialcore_train, columns), config)
    log = QuarantineLog("spatialcore_train_corrupted")
    written, metadata, check = write_with_images(
        frame,
        mcq_images,
        table_file_plans(context, storage.path)["spatialcore_train_corrupted"],
        StreamedTable(
            train_contract.SpatialcoreTrain,
            train_contract.CONTRACT_VERSION,
            asset_key="spatialcore_train_corrupted",
            quarantine=log,
            preview_columns=["question_id", "pseudo_gt"],
        ),
        {
            "fraction": config.fraction,
            "seed": config.seed,
            "boxes": stats.boxes,
            "corrupted_boxes": stats.chosen,
            "corrupted_by_mode": json_metadata(stats.by_mode),
        },
    )
    context.log.info("spatialcore_train_corrupted: %d of %d boxes corrupted", stats.chosen, stats.boxes)
    yield dg.Output(written, output_name="spatialcore_train_corrupted", metadata=metadata)
    yield check
    quarantine, metadata = quarantine_output(log)
    yield dg.Output(quarantine, output_name="spatialcore_train_corrupted_quarantine", metadata=metadata)


# --------------------------------------------------------------------------------------------------
# Audit
# --------------------------------------------------------------------------------------------------
class AuditConfig(dg.Config, audit_module.AuditSettings):
    """Run configuration of ``pseudo_gt_audit``: the sample, the bins and where the review files go."""

    folder: str | None = Field(
        default=None, description="Review folder; default <storage root>/audit/pseudo_gt."
    )


def _audit_folder(folder: str | None, storage: StorageResource) -> Path:
    return Path(folder) if folder else storage.path / "audit" / "pseudo_gt"


@dg.multi_asset(
    outs=table_and_quarantine_outs(
        "pseudo_gt_audit",
        "Boxes of N random training samples exported for manual review.",
        GROUNDING_CODE_VERSION,
    ),
    check_specs=contract_check_specs("pseudo_gt_audit"),
    group_name=GROUP,
)
def pseudo_gt_audit_asset(
    context: dg.AssetExecutionContext,
    config: AuditConfig,
    storage: StorageResource,
    spatialcore_train: TableFile,
    mcq_images: TableFile,
) -> Iterator[dg.Output | dg.AssetCheckResult]:
    """Draw the audit sample and write the review pictures and ``verdicts.csv`` (existing verdicts kept); only
    the sampled rows' images are read."""
    columns = [name for name in polars_schema(train_contract.SpatialcoreTrain) if name != "image"]
    sampled = audit_module.audited_rows(read_table_columns(spatialcore_train, columns), config)
    frame = audit_module.sample_audit(embed_images(sampled, mcq_images), config)
    folder = _audit_folder(config.folder, storage)
    verdicts_path = audit_module.write_review_files(frame, folder)
    log = QuarantineLog("pseudo_gt_audit")
    checked = finalize_table(
        frame,
        audit_contract.PseudoGtAudit,
        audit_contract.CONTRACT_VERSION,
        asset_key="pseudo_gt_audit",
        quarantine=log,
        preview_columns=["audit_id", "label", "validity", "confidence_bin", "question"],
        extra_metadata={
            "samples": frame["question_id"].n_unique() if frame.height else 0,
            "boxes": frame.height,
            "boxes_by_bin": json_metadata(
                {str(k): int(v) for k, v in frame.group_by("confidence_bin").len().iter_rows()}
                if frame.height
                else {}
            ),
            "verdicts_file": dg.MetadataValue.path(str(verdicts_path)),
            "instructions": dg.MetadataValue.md(
                f"Open the pictures in `{folder / 'images'}`, fill the `correct` column of `{verdicts_path}` "
                "with 1 (the box localises the intended object) or 0, then materialise `pseudo_gt_audit_precision`."
            ),
        },
    )
    yield dg.Output(checked.frame, output_name="pseudo_gt_audit", metadata=checked.metadata)
    yield checked.check
    quarantine, metadata = quarantine_output(log)
    yield dg.Output(quarantine, output_name="pseudo_gt_audit_quarantine", metadata=metadata)


class AuditPrecisionConfig(dg.Config, audit_module.ConfidenceBins):
    """Run configuration of ``pseudo_gt_audit_precision``: the verdicts file and the bins."""

    verdicts_path: str | None = Field(
        default=None,
        description="The filled verdicts file; default <storage root>/audit/pseudo_gt/verdicts.csv.",
    )


@dg.multi_asset(
    outs=table_and_quarantine_outs(
        "pseudo_gt_audit_precision",
        "Audit precision per confidence bin with 95% intervals (Figure 6).",
        GROUNDING_CODE_VERSION,
    ),
    check_specs=contract_check_specs("pseudo_gt_audit_precision"),
    group_name=GROUP,
)
def pseudo_gt_audit_precision_asset(
    context: dg.AssetExecutionContext,
    config: AuditPrecisionConfig,
    storage: StorageResource,
    pseudo_gt_audit: pl.DataFrame,
) -> Iterator[dg.Output | dg.AssetCheckResult]:
    """Import the reviewer's verdicts and compute precision per confidence bin."""
    path = (
        Path(config.verdicts_path)
        if config.verdicts_path
        else _audit_folder(None, storage) / audit_module.VERDICTS_FILE
    )
    log = QuarantineLog("pseudo_gt_audit_precision")
    if path.is_file():
        verdicts = audit_module.read_verdicts(path)
    else:
        context.log.warning("no verdicts file at %s yet: precision is empty until a reviewer fills it", path)
        verdicts = audit_module.Verdicts()
    for record_id, reason in verdicts.problems:
        log.add(record_id, f"unreadable verdict: {reason}", source_file=str(path))
    table, stale = audit_module.precision_by_bin(pseudo_gt_audit, verdicts, config.bin_edges)
    for audit_id in stale:
        log.add(audit_id, "verdict for a box that is not in the current audit export", source_file=str(path))
    reviewed = len(verdicts.correct) - len(stale)
    overall = table.filter(pl.col("confidence_bin") == "all")
    plot = audit_module.precision_plot(table) if reviewed else None
    checked = finalize_table(
        table,
        audit_contract.PseudoGtAuditPrecision,
        audit_contract.CONTRACT_VERSION,
        asset_key="pseudo_gt_audit_precision",
        quarantine=log,
        preview_columns=list(table.columns),
        extra_metadata={
            "verdicts_file": dg.MetadataValue.path(str(path)),
            "reviewed_boxes": reviewed,
            "unreviewed_boxes": pseudo_gt_audit.height - reviewed,
            "overall_precision": overall["precision"][0]
            if overall.height and overall["precision"][0] is not None
            else 0.0,
            **_image_metadata(plot, "audit_precision_plot", storage),
        },
    )
    yield dg.Output(checked.frame, output_name="pseudo_gt_audit_precision", metadata=checked.metadata)
    yield checked.check
    quarantine, metadata = quarantine_output(log)
    yield dg.Output(quarantine, output_name="pseudo_gt_audit_precision_quarantine", metadata=metadata)


# --------------------------------------------------------------------------------------------------
# SFT cold start
# --------------------------------------------------------------------------------------------------
class SftColdStartConfig(dg.Config, ColdStartSettings):
    """Run configuration of ``sft_cold_start``: the cold-start settings."""


@dg.multi_asset(
    outs=table_and_quarantine_outs(
        "sft_cold_start",
        "SFT cold-start set: training rows with target completions (bbox lines, reasoning, </think>, letter).",
        code_version=f"{GROUNDING_CODE_VERSION}-reasoning-{REASONING_PROMPT_VERSION}",
    ),
    check_specs=contract_check_specs("sft_cold_start"),
    group_name=GROUP,
    pool=LLM_POOL,
)
def sft_cold_start_asset(
    context: dg.AssetExecutionContext,
    config: SftColdStartConfig,
    sft_reasoning_llm: LLMResource,
    storage: StorageResource,
    spatialcore_train: TableFile,
    mcq_images: TableFile,
) -> Iterator[dg.Output | dg.AssetCheckResult]:
    """Select the cold-start rows and build their target completions (only the selected rows' images are read)."""
    columns = [name for name in polars_schema(train_contract.SpatialcoreTrain) if name != "image"]
    selected = cold_start_module.select_rows(read_table_columns(spatialcore_train, columns), config)
    with _llm_client(
        sft_reasoning_llm, config.calls_model, "sft_cold_start", cold_start_module.RESOURCE_KEY, storage
    ) as client:
        frame, log, backend = build_cold_start(embed_images(selected, mcq_images), config, llm_client=client)
        usage = client.summary.as_metadata() if client is not None else {}
        usage.update(llm_failure_check(client, config, "sft_cold_start", cold_start_module.RESOURCE_KEY))
    checked = finalize_table(
        frame,
        sft_contract.SftColdStart,
        sft_contract.CONTRACT_VERSION,
        asset_key="sft_cold_start",
        quarantine=log,
        preview_columns=["question_id", "answer", "completion"],
        extra_metadata={
            "reasoning_backend": backend,
            "model_family": config.model_family,
            "rows_with_boxes": int((frame["pseudo_gt"].list.len() > 0).sum()) if frame.height else 0,
            **usage,
        },
    )
    context.log.info("sft_cold_start: %d rows (%s)", checked.frame.height, backend)
    yield dg.Output(checked.frame, output_name="sft_cold_start", metadata=checked.metadata)
    yield checked.check
    quarantine, metadata = quarantine_output(log)
    yield dg.Output(quarantine, output_name="sft_cold_start_quarantine", metadata=metadata)


GROUNDING_ASSETS = [
    object_phrases_asset,
    pseudo_gt_boxes_asset,
    spatialcore_train_asset,
    spatialcore_train_corrupted_asset,
    pseudo_gt_audit_asset,
    pseudo_gt_audit_precision_asset,
    sft_cold_start_asset,
]
"""Every grounding asset definition, for the project's ``Definitions``."""
