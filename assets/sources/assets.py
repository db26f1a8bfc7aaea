"""Source assets (group ``sources``): each raw format ingested into a checked Parquet table.

| asset | contents | reader |
|---|---|---|
| ``mcq_questions`` | OmniSpatial and SpatiaLab multiple-choice questions with images | :func:`readers.mcq.omnispatial_questions`, :func:`readers.mcq.spatialab_questions` |
| ``scene_graphs`` | Visual Genome scene graphs (raw JSON, VG150 h5, or prompt-style Parquet), ``test`` images left out | :func:`readers.scene_graphs.stream_scene_graphs` (streamed) |
| ``rgbd_frames`` / ``rgbd_scenes`` | RGB-D scans of ScanNet, ARKitScenes and ScanNet++, one ``scenes`` partition per scan | :func:`readers.scans.read_scan` |

Every row carries its ``origin``: ``sample_world`` when its kind of source fell back to the built-in
sample world, ``real`` when it was read from a configured data set. The sample world is used only
for a kind of source with no real data set configured (see :class:`assets.resources.SourcesResource`),
so synthetic and real rows of one kind never mix.

Every asset writes its rejected records to a ``*_quarantine`` table, carries a blocking contract
check, and depends on the observable source asset of its raw files (:mod:`assets.raw_files`), whose
content version is what Dagster's automation compares, so unchanged inputs leave downstream assets
fresh. A source that holds no record (a ``data.json`` holding ``[]``, a 0-row Parquet file; unless the
``sources`` resource's ``allow_empty_sources`` names it) or whose records are all quarantined (a wrong
layout, a wrong image folder) fails the asset before any output, so the previous tables are kept: the
failure (:func:`assets.tables.input_failure`) shows one sentence naming the input, its location and the
config field, with the quarantined count and first reasons in its metadata, and the asset's contract
checks show as not executed, not as failed. A source read from the built-in sample world (no real data set of
its kind configured) names the sample world instead, with how to regenerate it and `sample_world_root`
(:func:`input_field`), not a field the user never set.

``scene_graphs`` keeps only the splits in ``scene_graph_splits`` (default train and val): the VG150
test images never reach the questions generated from it (STVQA, single-image DGE tasks). The images
left out are counted in the metadata (``excluded_by_split``), not quarantined.
"""

import logging
import tempfile
from collections import Counter
from collections.abc import Iterator, Mapping
from itertools import islice
from pathlib import Path
from typing import Any, TypedDict

import dagster as dg
import polars as pl
import pyarrow.parquet as pq

from assets.compute import partition_results
from assets.partition_ranges import (
    SINGLE_RUN,
    PortableEvent,
    portable_events,
    restore_events,
    run_partitions,
)
from assets.partitions import scenes_partitions
from assets.previews import draw_boxes, gallery
from assets.provenance import TableFilePlan, table_file_plans, write_outputs
from assets.raw_files import HASH_CACHE_NAME, FileHashCache, observe_scan, scan_folders
from assets.resources import (
    SAMPLE_WORLD_FIELD,
    SourcesResource,
    StorageResource,
    WorkersResource,
    sample_world_remedy,
)
from assets.stvqa.shards import shard_of
from assets.tables import (
    StreamedTable,
    contract_check_specs,
    finalize_table,
    input_failure,
    quarantine_output,
    table_and_quarantine_outs,
    value_counts,
)
from data_contracts import mcq_questions, rgbd_frames, rgbd_scenes, scene_graphs
from data_contracts.images import encode_image
from data_contracts.origin import SAMPLE_WORLD as SAMPLE_WORLD_ORIGIN
from data_contracts.parquet_files import ROW_GROUP_BYTES, ROW_GROUP_ROWS, ParquetTableWriter, arrow_frame
from data_contracts.quarantine import QuarantineLog
from data_contracts.scan_datasets import DATASET_NAMES
from data_contracts.validation import polars_schema
from readers.common import EmptySourceError, MissingInputError, require_rows
from readers.mcq import iter_image_cells, omnispatial_questions, spatialab_questions
from readers.scan_tables import scan_tables
from readers.scans import ScanFolder, read_scan
from readers.scene_graphs import SCENE_GRAPH_LAYOUTS, SceneGraphStream, stream_scene_graphs

logger = logging.getLogger(__name__)

GROUP = "sources"
SOURCES_CODE_VERSION = "2"
# The scan tables' own version: 4: axis_alignment (the scan's gravity, from ScanNet's <scene>.txt meta file);
# 3: ARKitScenes and ScanNet++ (upright_turns, object boxes, world_up).
SCANS_CODE_VERSION = "4"


def with_origin(frame: pl.DataFrame, origin: str) -> pl.DataFrame:
    """``frame`` with an ``origin`` column (``sample_world`` or ``real``) on every row.

    >>> with_origin(pl.DataFrame({"a": [1, 2]}), "real")["origin"].to_list()
    ['real', 'real']
    """
    return frame.with_columns(origin=pl.lit(origin, dtype=pl.String))


def _mcq_preview(frame: pl.DataFrame):
    return gallery([draw_boxes(row["image"], []) for row in frame.head(3).iter_rows(named=True)])


def _mcq_question_preview(paths: list[str]):
    def preview(frame: pl.DataFrame):
        return gallery([draw_boxes(encode_image(path), []) for path in paths[:3]])

    return preview


def _scene_graph_preview(frame: pl.DataFrame):
    images = []
    for row in frame.head(3).iter_rows(named=True):
        boxes = [obj["bbox"] for obj in row["objects"]]
        images.append(draw_boxes(row["image"], boxes, [obj["name"] for obj in row["objects"]]))
    return gallery(images)


class InputField(TypedDict):
    """The config field and remedy that :func:`readers.common.require_rows` names for a source."""

    config_field: str
    remedy: str | None


def input_field(origin: str, config_field: str, unset_fields: str) -> InputField:
    """The ``config_field`` and ``remedy`` :func:`readers.common.require_rows` names for a source of ``origin``: the
    source's own field for real data; for the sample world, `sample_world_root` and how to regenerate it (its
    ``unset_fields``, being unset, chose it).

    >>> input_field("real", "omnispatial_root", "`omnispatial_root`")
    {'config_field': 'omnispatial_root', 'remedy': None}
    >>> input_field("sample_world", "omnispatial_root", "`omnispatial_root`")["config_field"]
    'sample_world_root'
    """
    if origin == SAMPLE_WORLD_ORIGIN:
        return {"config_field": SAMPLE_WORLD_FIELD, "remedy": sample_world_remedy(unset_fields)}
    return {"config_field": config_field, "remedy": None}


QUESTION_FIELDS = "`omnispatial_root` or `spatialab_path`"
"""The config fields whose being unset makes the questions the sample world's."""


def read_questions(sources: SourcesResource, storage: StorageResource) -> tuple[pl.DataFrame, QuarantineLog]:
    """The multiple-choice questions of the configured sources (or the sample world's, see
    :func:`readers.mcq.question_frame`: no image bytes) and their quarantine.

    Raises:
        MissingInputError: when a configured location does not exist.
        EmptySourceError: when a source holds no record (and is not in `allow_empty_sources`) or every record
            of it was quarantined.
    """
    log = QuarantineLog("mcq_questions")
    frames = []
    omnispatial_root = sources.omnispatial(storage)
    if omnispatial_root is not None:
        frame, omnispatial_log = omnispatial_questions(
            omnispatial_root, split=sources.omnispatial_split, test_fraction=sources.omnispatial_test_fraction
        )
        require_rows(
            frame.height,
            omnispatial_log,
            what="OmniSpatial",
            location=omnispatial_root,
            **input_field(sources.questions_origin(), "omnispatial_root", QUESTION_FIELDS),
            allow_empty=sources.allows_empty("omnispatial"),
            allow_empty_switch=sources.allow_empty_switch("omnispatial"),
        )
        frames.append(frame)
        log.extend(omnispatial_log)
    spatialab = sources.spatialab(storage)
    if spatialab is not None:
        spatialab_frame, spatialab_log = spatialab_questions(spatialab, images_dir=sources.spatialab_images())
        require_rows(
            spatialab_frame.height,
            spatialab_log,
            what="SpatiaLab",
            location=spatialab,
            **input_field(
                sources.questions_origin(), "spatialab_path` / `spatialab_images_dir", QUESTION_FIELDS
            ),
            allow_empty=sources.allows_empty("spatialab"),
            allow_empty_switch=sources.allow_empty_switch("spatialab"),
        )
        frames.append(spatialab_frame)
        log.extend(spatialab_log)
    return pl.concat(frames), log


@dg.multi_asset(
    outs={
        **table_and_quarantine_outs(
            "mcq_questions",
            "Multiple-choice spatial questions (OmniSpatial, SpatiaLab), each naming its image by image_sha256; "
            "gold answer as a 0-based index and its letter.",
            SOURCES_CODE_VERSION,
            "Questions rejected while reading the raw files, with the reason and source file.",
        ),
        "mcq_images": dg.AssetOut(
            description="The questions' images, one row per distinct image (image_sha256, the file's bytes, size).",
            code_version=SOURCES_CODE_VERSION,
        ),
    },
    check_specs=contract_check_specs("mcq_questions", "mcq_images"),
    group_name=GROUP,
    deps=["sample_world", "raw_mcq_files"],
)
def mcq_questions_asset(
    context: dg.AssetExecutionContext, sources: SourcesResource, storage: StorageResource
) -> Iterator[dg.Output | dg.AssetCheckResult]:
    """Read OmniSpatial (``data.json``, 0-based answers) and SpatiaLab (1-based answers): the configured
    ones, or both of the sample world's when neither is configured. The images are written once each, a batch
    at a time, to ``mcq_images``."""
    try:
        frame, log = read_questions(sources, storage)
    except (MissingInputError, EmptySourceError) as error:
        raise input_failure(error) from None
    origin = sources.questions_origin()
    combined = with_origin(frame, origin)
    checked = finalize_table(
        combined.drop("image_path"),
        mcq_questions.McqQuestions,
        mcq_questions.CONTRACT_VERSION,
        asset_key="mcq_questions",
        quarantine=log,
        preview_columns=["question_id", "question", "options", "answer", "task_type", "split"],
        preview_image=_mcq_question_preview(combined["image_path"].head(3).to_list()),
        storage_root=storage.path,
        extra_metadata={
            "origin": origin,
            "rows_by_source": dg.MetadataValue.json(value_counts(combined, "source")),
            "rows_by_split": dg.MetadataValue.json(value_counts(combined, "split")),
            "distinct_images": combined["image_sha256"].n_unique(),
        },
    )
    context.log.info("mcq_questions: %d %s rows, %d quarantined", checked.frame.height, origin, len(log))
    yield dg.Output(checked.frame, output_name="mcq_questions", metadata=checked.metadata)
    yield checked.check
    images_plan = table_file_plans(context, storage.path)["mcq_images"]
    images = StreamedTable(
        mcq_questions.McqImages,
        mcq_questions.IMAGES_CONTRACT_VERSION,
        asset_key="mcq_images",
        quarantine=log,
        preview_columns=["image_sha256", "image", "image_width", "image_height"],
        preview_image=_mcq_preview,
    )
    schema = polars_schema(mcq_questions.McqImages)
    kept = combined.filter(pl.col("question_id").is_in(checked.frame["question_id"].implode()))
    with images_plan.writer(None, schema, mcq_questions.IMAGES_CONTRACT_VERSION) as out:
        cells = iter_image_cells(kept)
        while batch := list(islice(cells, IMAGE_BATCH_ROWS)):
            out.write(images.check(pl.DataFrame(batch, schema=schema)))
    metadata, check = images.finish({"questions": checked.frame.height})
    yield dg.Output(images_plan.written(None), output_name="mcq_images", metadata=metadata)
    yield check
    quarantine, metadata = quarantine_output(log)
    yield dg.Output(quarantine, output_name="mcq_questions_quarantine", metadata=metadata)


IMAGE_BATCH_ROWS = 256
"""Images read and written at a time by the ``mcq_images`` output."""


def open_scene_graph_source(sources: SourcesResource, storage: StorageResource) -> SceneGraphStream:
    """The scene graphs of the configured Visual Genome source (or the sample world's), kept splits only, as a
    stream of batches.

    Raises:
        MissingInputError: when the configured location does not exist.
    """
    return stream_scene_graphs(
        sources.visual_genome(storage),
        layout=sources.visual_genome_layout,
        images_dir=sources.visual_genome_images(),
        box_scale=sources.vg150_box_scale,
        split=sources.visual_genome_split,
        keep_splits=sources.scene_graph_splits,
    )


def require_scene_graphs(
    stream: SceneGraphStream, rows: int, sources: SourcesResource, storage: StorageResource
):
    """Raise :class:`EmptySourceError` when the consumed ``stream`` gave no row of the kept splits: no record at
    all (unless `visual_genome` is in `allow_empty_sources`), every record quarantined, or every image of a
    split left out."""
    root = sources.visual_genome(storage)
    excluded = sum(stream.excluded_by_split.values())
    # kept images all quarantined (a VG150 h5 whose images are elsewhere) fail with their reasons, not the splits
    require_rows(
        rows + (0 if len(stream.quarantine) else excluded),
        stream.quarantine,
        what=f"Visual Genome ({stream.layout} layout)",
        location=root,
        **input_field(
            sources.scene_graphs_origin(),
            "visual_genome_root` / `visual_genome_images_dir",
            "`visual_genome_root`",
        ),
        allow_empty=sources.allows_empty("visual_genome"),
        allow_empty_switch=sources.allow_empty_switch("visual_genome"),
    )
    if rows == 0 and excluded:
        raise EmptySourceError(
            f"Visual Genome at {root} gave no image of the kept splits {sources.scene_graph_splits}: "
            f"{dict(stream.excluded_by_split)} left out; check the config fields `scene_graph_splits` and "
            "`visual_genome_split`.",
            location=root,
            config_field="scene_graph_splits",
        )


SHARD_STAGING_BYTES = 4 << 20
"""Rows of one STVQA shard held before they are appended to its staging file (32 shards: about 128 MB at most)."""


class _ShardStaging:
    """Rows grouped by STVQA shard in staging files, then copied shard after shard into one file, so the table's
    row groups each hold one shard's rows (a shard step reads only its own row groups)."""

    def __init__(self, folder: Path, schema: pl.Schema) -> None:
        self.folder, self.schema = folder, schema
        self._pending: dict[str, list[pl.DataFrame]] = {}
        self._handles: dict[str, Any] = {}
        self._writers: dict[str, ParquetTableWriter] = {}

    def add(self, frame: pl.DataFrame) -> None:
        if frame.height == 0:
            return
        shards = frame["image_id"].map_elements(shard_of, return_dtype=pl.String)
        for (shard,), rows in frame.with_columns(_shard=shards).partition_by("_shard", as_dict=True).items():
            self._pending.setdefault(shard, []).append(rows.drop("_shard"))
            if sum(part.estimated_size() for part in self._pending[shard]) >= SHARD_STAGING_BYTES:
                self._flush(shard)

    def _flush(self, shard: str) -> None:
        if shard not in self._writers:
            self._handles[shard] = (self.folder / f"{shard}.parquet").open("wb")
            self._writers[shard] = ParquetTableWriter(self._handles[shard], self.schema)
        self._writers[shard].write(pl.concat(self._pending.pop(shard)))

    def copy_into(self, out: ParquetTableWriter) -> None:
        """Append every shard's rows to ``out``, shard after shard, row groups of about ROW_GROUP_BYTES."""
        for shard in list(self._pending):
            self._flush(shard)
        for shard in sorted(self._writers):
            self._writers[shard].close()
            self._handles[shard].close()
            with (self.folder / f"{shard}.parquet").open("rb") as handle:
                staged = pq.ParquetFile(handle)
                meta = staged.metadata
                size = sum(meta.row_group(index).total_byte_size for index in range(meta.num_row_groups))
                batch_rows = max(
                    1, min(ROW_GROUP_ROWS, ROW_GROUP_BYTES * max(1, meta.num_rows) // max(1, size))
                )
                for batch in staged.iter_batches(batch_size=batch_rows):
                    out.write(arrow_frame(batch))


@dg.multi_asset(
    outs=table_and_quarantine_outs(
        "scene_graphs",
        "Scene graphs: objects (canonical boxes, names, attributes) and relations per image; rows grouped by "
        "STVQA shard.",
        SOURCES_CODE_VERSION,
        "Images, objects and relations rejected while reading (missing images, zero-area boxes, "
        "dangling relations).",
    ),
    check_specs=contract_check_specs("scene_graphs"),
    group_name=GROUP,
    deps=["sample_world", "raw_scene_graph_files"],
)
def scene_graphs_asset(
    context: dg.AssetExecutionContext, sources: SourcesResource, storage: StorageResource
) -> Iterator[dg.Output | dg.AssetCheckResult]:
    """Read Visual Genome scene graphs in the configured (or detected) layout; keep the configured splits.

    The source is read a batch of images at a time and the table written as it is read (memory holds a
    batch, not the data set), its rows grouped by STVQA shard (``assets.stvqa.shards``) so that each shard's
    steps read only their own row groups.
    """
    if sources.visual_genome_layout not in SCENE_GRAPH_LAYOUTS:
        raise dg.Failure(
            f"unknown visual_genome_layout {sources.visual_genome_layout!r}: use "
            f"{', '.join(map(repr, SCENE_GRAPH_LAYOUTS))}"
        )
    origin = sources.scene_graphs_origin()
    plan = table_file_plans(context, storage.path)["scene_graphs"]
    schema = polars_schema(scene_graphs.SceneGraphs)
    objects = relationships = 0
    splits: Counter[str] = Counter()
    try:
        stream = open_scene_graph_source(sources, storage)
        table = StreamedTable(
            scene_graphs.SceneGraphs,
            scene_graphs.CONTRACT_VERSION,
            asset_key="scene_graphs",
            quarantine=stream.quarantine,
            preview_columns=["image_id", "image_width", "image_height", "objects", "relationships"],
            preview_image=_scene_graph_preview,
            storage_root=storage.path,
        )
        storage.path.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix=".scene_graphs.", dir=storage.path) as staging_folder:
            staging = _ShardStaging(Path(staging_folder), schema)
            for batch in stream.batches():
                valid = table.check(with_origin(batch, origin))
                objects += int(valid["objects"].list.len().sum() or 0)
                relationships += int(valid["relationships"].list.len().sum() or 0)
                splits.update(valid["split"].to_list())
                staging.add(valid)
            require_scene_graphs(stream, table.rows, sources, storage)
            with plan.writer(None, schema, scene_graphs.CONTRACT_VERSION) as out:
                staging.copy_into(out)
    except (MissingInputError, EmptySourceError) as error:
        raise input_failure(error) from None
    metadata, check = table.finish(
        {
            "layout": stream.layout,
            "origin": origin,
            "objects": objects,
            "relationships": relationships,
            "rows_by_split": dg.MetadataValue.json(dict(sorted(splits.items()))),
            "excluded_by_split": dg.MetadataValue.json(dict(stream.excluded_by_split)),
        }
    )
    log = stream.quarantine
    context.log.info("scene_graphs: %d images, %d quarantined records", table.rows, len(log))
    yield dg.Output(plan.written(None), output_name="scene_graphs", metadata=metadata)
    yield check
    quarantine, quarantine_metadata = quarantine_output(log)
    yield dg.Output(quarantine, output_name="scene_graphs_quarantine", metadata=quarantine_metadata)


@dg.multi_asset(
    outs={
        "rgbd_frames": dg.AssetOut(
            description="RGB-D frames of ScanNet, ARKitScenes and ScanNet++ scans: file paths, upright sizes, "
            "intrinsics, camera-to-world poses (one partition per scan).",
            code_version=SCANS_CODE_VERSION,
        ),
        "rgbd_scenes": dg.AssetOut(
            description="RGB-D scans: data set, folder, mesh, segmentation, annotated objects (and boxes), up axis, "
            "frame count (one partition per scan).",
            code_version=SCANS_CODE_VERSION,
        ),
        "rgbd_frames_quarantine": dg.AssetOut(
            description="Frames and scenes rejected while reading (invalid, non-rigid or unmatched poses, missing "
            "files).",
            code_version=SCANS_CODE_VERSION,
        ),
    },
    check_specs=contract_check_specs("rgbd_frames", "rgbd_scenes"),
    group_name=GROUP,
    deps=["sample_world", "raw_scan_files"],
    partitions_def=scenes_partitions,
    backfill_policy=SINGLE_RUN,
)
def rgbd_asset(
    context: dg.AssetExecutionContext,
    sources: SourcesResource,
    storage: StorageResource,
    workers: WorkersResource,
) -> Iterator[dg.Output | dg.AssetCheckResult]:
    """Read each scan (one partition per scan: a ScanNet SensReader export, an ARKitScenes 3dod video or a
    ScanNet++ scene) with its data set's reader; the scans of a range run in the step's worker processes."""
    try:
        scans = scan_folders(sources, storage)
    except MissingInputError as error:
        raise input_failure(error) from None
    plans = table_file_plans(context, storage.path)
    arguments = {
        scene_id: (
            scans.get(scene_id),
            scene_id,
            sources.scans_origin(),
            storage.path / HASH_CACHE_NAME,
            plans,
        )
        for scene_id in context.partition_keys
    }
    with partition_results(scan_partition, arguments, workers.count()) as result:
        yield from run_partitions(context, lambda scene_id: restore_events(result(scene_id)), plans)


def scan_partition(
    scan: ScanFolder | None,
    scene_id: str,
    origin: str,
    hash_cache: Path,
    plans: Mapping[str, TableFilePlan],
) -> list[PortableEvent]:
    """One scan's ``rgbd_frames``, ``rgbd_scenes`` and quarantine files written, its events as
    :func:`portable_events` (``scan`` None: the partition's scan is gone)."""
    with FileHashCache(hash_cache) as hashes:
        events = list(_scan_tables(scan, scene_id, origin, hashes))
    return portable_events(write_outputs(events, plans, scene_id))


def _scan_tables(
    scan: ScanFolder | None, scene_id: str, origin: str, hashes: FileHashCache
) -> Iterator[dg.Output | dg.AssetCheckResult]:
    """One scan's ``rgbd_frames``, ``rgbd_scenes`` and quarantine rows, with their checks.

    Their data version is the scan's content version (as ``raw_scan_files`` observes it) with the code
    version: Dagster does not read a partitioned observation's version for the partition, so the tables
    say it themselves (for a run of one scan; a range run keeps each scan's in its metadata).

    Raises:
        dg.Failure: when the scan is gone, lacks a file it needs (an annotation, a trajectory: one sentence
            naming it) or gave no usable frame (the previous tables are kept).
    """
    if scan is None or not scan.folder.is_dir():
        where = "" if scan is None else f" {scan.folder}"
        raise dg.Failure(
            description=f"scan {scene_id}: its folder{where} is gone from the configured scan roots; restore it, or "
            f"delete the partition {scene_id!r} of the `scenes` partitions if the scan was removed on purpose.",
            metadata={} if scan is None else {"scan_folder": dg.MetadataValue.path(str(scan.folder))},
        )
    try:
        frames_rows, scene_row, log = read_scan(scan)
        tables = scan_tables(frames_rows, [] if scene_row is None else [scene_row], log)
        require_rows(
            tables.scenes.height,
            log,
            what=f"{DATASET_NAMES[scan.dataset]} scan {scene_id}",
            location=scan.folder,
            **input_field(
                origin, scan.config_field, "`scannet_root`, `arkitscenes_root` or `scannetpp_root`"
            ),
        )
    except (MissingInputError, EmptySourceError) as error:
        raise input_failure(error, scan=scene_id) from None
    frames = finalize_table(
        with_origin(tables.frames, origin),
        rgbd_frames.RgbdFrames,
        rgbd_frames.CONTRACT_VERSION,
        asset_key="rgbd_frames",
        quarantine=log,
        record_id_column="scene_id",
        preview_columns=[
            "scene_id",
            "frame_index",
            "color_width",
            "color_height",
            "depth_width",
            "depth_height",
        ],
    )
    scene_log = QuarantineLog("rgbd_scenes")
    scenes = finalize_table(
        with_origin(tables.scenes, origin),
        rgbd_scenes.RgbdScenes,
        rgbd_scenes.CONTRACT_VERSION,
        asset_key="rgbd_scenes",
        quarantine=scene_log,
        preview_columns=["scene_id", "num_frames", "objects"],
        extra_metadata={"frames": frames.frame.height, "origin": origin, "dataset": scan.dataset},
    )
    log.extend(scene_log)
    logger.info("rgbd %s: %d frames, %d quarantined", scene_id, frames.frame.height, len(log))
    version = dg.DataVersion(f"{SCANS_CODE_VERSION}-{observe_scan(scan, hashes)[0]}")
    yield dg.Output(frames.frame, output_name="rgbd_frames", metadata=frames.metadata, data_version=version)
    yield frames.check
    yield dg.Output(scenes.frame, output_name="rgbd_scenes", metadata=scenes.metadata, data_version=version)
    yield scenes.check
    quarantine, metadata = quarantine_output(log)
    yield dg.Output(quarantine, output_name="rgbd_frames_quarantine", metadata=metadata, data_version=version)


SOURCE_ASSETS = [mcq_questions_asset, scene_graphs_asset, rgbd_asset]
