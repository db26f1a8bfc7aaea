"""DGE assets (group ``dge``): per-scan geometry, per-frame visibility and exact tasks, one partition per scan.

| asset | one row per | built by |
|---|---|---|
| ``scene_geometry`` | scan (partition) | :func:`assets.dge.geometry.build_scan_geometry` |
| ``frame_visibility`` | (frame, object in view) | :func:`assets.dge.visibility.build_frame_visibility` |
| ``dge_tasks`` | question | :func:`assets.dge.tasks.build_scene_tasks` |
| ``dge_image_tasks`` | question about one image (estimated depth) | :func:`assets.dge.single_image.single_image_tasks` |

The first three are partitioned by ``scenes_partitions`` (dynamic, one key per scene id), like the
``rgbd_frames`` / ``rgbd_scenes`` tables they read (the same partition of each); a scan that cannot be
built fails its own partition only. Each writes its rejected records (bad frames, unmeasurable objects, rows that
break the contract) to a ``*_quarantine`` table and carries a blocking contract check.
``dge_image_tasks`` is unpartitioned, reads ``scene_graphs`` and produces rows flagged
``estimated`` only when a depth source is configured.

A run over several scans computes them in worker processes (:func:`assets.compute.partition_results`;
the ``workers`` resource sets how many): each scan's whole partition (the work, the contract check,
the previews) is one plain function of picklable values, and the outputs are emitted in key order, so
they are those of a serial run. ``scene_geometry`` with ``compute: ray`` runs the same function as Ray
tasks instead (the workers read the raw scans and write the previews under the storage root, so both
must be on storage every node sees).
"""

import json
import logging
from collections import Counter
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import cast

import dagster as dg
import polars as pl
from PIL import Image

from assets.compute import ComputeSettings, compute_settings, partition_results
from assets.dge.geometry import (
    ScanGeometry,
    SceneBuildError,
    SceneGeometrySettings,
    build_scan_geometry,
    camera_poses_in_gravity,
    frame_records,
)
from assets.dge.plots import top_down_plot
from assets.dge.single_image import SingleImageSettings, single_image_tasks
from assets.dge.tasks import GenerationReport, TaskSettings, build_scene_tasks, horizontal_heading
from assets.dge.tasks.rows import colour_problem
from assets.dge.visibility import VisibilitySettings, build_frame_visibility
from assets.partition_ranges import (
    SINGLE_RUN,
    PartitionFiles,
    PortableEvent,
    TableFile,
    iter_row_groups,
    portable_events,
    read_partition,
    restore_events,
    run_partitions,
)
from assets.partitions import SCENES_PARTITIONS_NAME, scenes_partitions
from assets.previews import draw_boxes, gallery, markdown_image, save_preview, with_caption
from assets.provenance import TableFilePlan, table_file_plans, write_outputs
from assets.resources import StorageResource, WorkersResource
from assets.tables import (
    EMPTY_REASON_KEY,
    StreamedTable,
    contract_check_specs,
    finalize_table,
    json_metadata,
    quarantine_output,
    row_with_arrays,
    table_and_quarantine_outs,
    value_counts,
)
from data_contracts import dge_tasks as dge_tasks_contract
from data_contracts import frame_visibility as frame_visibility_contract
from data_contracts import scene_geometry as scene_geometry_contract
from data_contracts.images import encode_image, upright_image
from data_contracts.quarantine import QuarantineLog
from data_contracts.validation import polars_schema

logger = logging.getLogger(__name__)

GROUP = "dge"
# 10: gravity from the scan's axis alignment or the cameras' common up axis, the coverage term halved; 9: visibility from points: the in-frame share is the smaller of the points' and the oriented box's; 8: a mesh
# object is whole (coverage 1), an instance-mask object cut off by every frame or floating above its support counts
# what was unseen in its uncertainty; 7: a wall must cover a quarter of its side, the room's walled
# sides are recorded; 6: instance-mask objects' tops raised to their masks' tops; 5: outward faces and legs of
# instance-mask objects; 4: mask vote, settled noisy objects; 3: confidence, walls, faces, balanced tasks; 2: ray
# cast.
DGE_CODE_VERSION = "10"
# The questions' own version (dge_tasks, dge_image_tasks): 9: camera turns below a half turn, gold letters drawn
# uniformly per question, no question that needs "up" where it is a guess, the masks' shortfall, comparisons gated at
# 0.5 m; 8: max_answer_share of the questions a scene emits
# (none when every clear candidate has one answer); 7: room size only when walls bound every side; 6: origin.
DGE_TASKS_CODE_VERSION = "9"
SCENE_GEOMETRY = "scene_geometry"
FRAME_VISIBILITY = "frame_visibility"
DGE_TASKS = "dge_tasks"
DGE_IMAGE_TASKS = "dge_image_tasks"

__all__ = [
    "DGE_ASSETS",
    "SCENES_PARTITIONS_NAME",
    "dge_image_tasks_asset",
    "dge_tasks_asset",
    "frame_visibility_asset",
    "scene_geometry_asset",
    "scenes_partitions",
]


class SceneGeometryAssetConfig(dg.Config, SceneGeometrySettings, ComputeSettings):
    """Run configuration of ``scene_geometry``: the scan geometry settings (see :class:`assets.dge.geometry.SceneGeometrySettings`) and where they run (:class:`assets.compute.ComputeSettings`)."""


class FrameVisibilityAssetConfig(dg.Config, VisibilitySettings):
    """Run configuration of ``frame_visibility``: the visibility thresholds (see :class:`assets.dge.visibility.VisibilitySettings`)."""


class DgeTasksAssetConfig(dg.Config, TaskSettings):
    """Run configuration of ``dge_tasks``: the question settings (see :class:`assets.dge.tasks.TaskSettings`)."""


class DgeImageTasksAssetConfig(dg.Config, SingleImageSettings):
    """Run configuration of ``dge_image_tasks``: the depth source and trust (nothing is produced unless a source is set)."""


def _scene_row(scenes_file: Path, scene_id: str) -> dict:
    rows = read_partition(scenes_file).filter(pl.col("scene_id") == scene_id)
    if rows.height == 0:
        raise dg.Failure(
            description=f"scene {scene_id} is not in rgbd_scenes (partition key without a scan); "
            "rematerialise rgbd_frames/rgbd_scenes or remove the partition",
        )
    return rows.row(0, named=True)


def _top_down(
    geometry: ScanGeometry, frames: pl.DataFrame, storage_path: Path
) -> dict[str, dg.MetadataValue]:
    records = frame_records(frames.filter(pl.col("scene_id") == geometry.scene_id))
    cameras = []
    for _, pose in sorted(camera_poses_in_gravity(geometry, records).items()):
        cameras.append((pose[:3, 3], horizontal_heading(pose)))
    image = top_down_plot(
        geometry.room.footprint,
        geometry.objects,
        cameras,
        title=f"{geometry.scene_id}: {len(geometry.objects)} objects, {len(cameras)} cameras",
        cloud_points=geometry.cloud_points,
    )
    path = save_preview(image, storage_path, f"{SCENE_GEOMETRY}__{geometry.scene_id}")
    return {
        "top_down_plot": dg.MetadataValue.md(markdown_image(image, alt=f"top-down {geometry.scene_id}")),
        "top_down_plot_path": dg.MetadataValue.path(str(path)),
    }


@dg.multi_asset(
    outs=table_and_quarantine_outs(
        SCENE_GEOMETRY,
        "Per scan: fused voxel cloud, floor plane and gravity frame, room size, and per object its "
        "cleaned points, axis-aligned and oriented boxes, centroid, size and point count.",
        DGE_CODE_VERSION,
        "Frames (empty or NaN depth, non-rigid pose, unreadable files) and objects (too few points) "
        "left out of the scan's geometry, with the reason.",
    ),
    ins={"rgbd_frames": dg.AssetIn(), "rgbd_scenes": dg.AssetIn()},
    partitions_def=scenes_partitions,
    check_specs=contract_check_specs(SCENE_GEOMETRY),
    group_name=GROUP,
    backfill_policy=SINGLE_RUN,
)
def scene_geometry_asset(
    context: dg.AssetExecutionContext,
    config: SceneGeometryAssetConfig,
    storage: StorageResource,
    workers: WorkersResource,
    rgbd_frames: PartitionFiles,
    rgbd_scenes: PartitionFiles,
) -> Iterator[dg.Output | dg.AssetCheckResult]:
    """Fuse each scan's RGB-D frames (open3d) and measure its floor, room and objects."""
    settings = SceneGeometrySettings.model_validate(
        config.model_dump(include=set(SceneGeometrySettings.model_fields))
    )
    plans = table_file_plans(context, storage.path)
    arguments = {
        scene_id: (scene_id, rgbd_scenes[scene_id], rgbd_frames[scene_id], settings, storage.path, plans)
        for scene_id in context.partition_keys
    }
    with partition_results(
        scene_geometry_partition, arguments, workers.count(), compute_settings(config)
    ) as result:
        yield from run_partitions(context, lambda scene_id: restore_events(result(scene_id)), plans)


def scene_geometry_partition(
    scene_id: str,
    scenes_file: Path,
    frames_file: Path,
    settings: SceneGeometrySettings,
    storage_path: Path,
    plans: Mapping[str, TableFilePlan],
) -> list[PortableEvent]:
    """One scan of ``scene_geometry``: its files written, its outputs and check as :func:`portable_events`
    (``scenes_file``, ``frames_file``: the scan's ``rgbd_scenes`` and ``rgbd_frames`` files)."""
    scene = _scene_row(scenes_file, scene_id)
    scene_frames = read_partition(frames_file)
    log = QuarantineLog(SCENE_GEOMETRY)
    try:
        geometry = build_scan_geometry(scene_frames, scene, settings, log)
    except SceneBuildError as error:
        raise dg.Failure(description=str(error)) from error
    checked = finalize_table(
        geometry.to_frame(),
        scene_geometry_contract.SceneGeometry,
        scene_geometry_contract.CONTRACT_VERSION,
        asset_key=SCENE_GEOMETRY,
        quarantine=log,
        preview_columns=[
            "scene_id",
            "object_points_source",
            "room_length_m",
            "room_width_m",
            "room_area_m2",
            "num_objects",
            "num_cloud_points",
            "num_quarantined_frames",
        ],
        extra_metadata={
            "object_points_source": geometry.object_points_source,
            "frames_used": len(geometry.used_frames),
            "objects": len(geometry.objects),
            "objects_dropped": len(geometry.dropped_objects),
            "object_point_counts": json_metadata(
                {f"{o.object_id}:{o.label}": o.point_count for o in geometry.objects}
            ),
            "object_labels": json_metadata(_label_counts([o.label for o in geometry.objects])),
            "cloud_points": len(geometry.cloud_points),
            "room_size_m": json_metadata(
                {
                    "length": round(geometry.room.length_m, 3),
                    "width": round(geometry.room.width_m, 3),
                    "height": round(geometry.room.height_m, 3),
                    "area_m2": round(geometry.room.area_m2, 2),
                    "floor_area_m2": round(geometry.room.floor_area_m2, 2),
                    "walled_sides": geometry.room.walled_sides,
                }
            ),
            "floor_tilt_deg": round(geometry.floor.tilt_deg(), 4),
            **_top_down(geometry, scene_frames, storage_path),
        },
    )
    logger.info(
        "scene_geometry %s: %d objects, %d quarantined records", scene_id, len(geometry.objects), len(log)
    )
    quarantine, metadata = quarantine_output(log)
    events = [
        dg.Output(checked.frame, output_name=SCENE_GEOMETRY, metadata=checked.metadata),
        checked.check,
        dg.Output(quarantine, output_name=f"{SCENE_GEOMETRY}_quarantine", metadata=metadata),
    ]
    return portable_events(write_outputs(events, plans, scene_id))


def _label_counts(labels: list[str]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for label in labels:
        counts[label] = counts.get(label, 0) + 1
    return dict(sorted(counts.items()))


def _column_mean(frame: pl.DataFrame, column: str) -> float:
    """The mean of a non-empty frame's numeric or boolean column (polars types a mean as any Python value)."""
    return float(cast(float, frame[column].mean()))


def _visibility_preview(frames: pl.DataFrame):
    def preview(visibility: pl.DataFrame):
        images = []
        for (frame_index,), rows in visibility.filter(pl.col("bbox").is_not_null()).group_by(
            ["frame_index"], maintain_order=True
        ):
            frame = frames.filter(pl.col("frame_index") == frame_index)
            if frame.height == 0 or colour_problem(frame["color_path"][0]):
                continue  # a frame whose colour image is gone has no preview (dge_tasks quarantines it)
            path, turns = frame["color_path"][0], int(frame["upright_turns"][0])
            if turns:  # a frame stored rotated is shown upright
                with Image.open(path) as stored:
                    cell = encode_image(upright_image(stored.convert("RGB"), turns))
            else:
                cell = encode_image(path)
            images.append(draw_boxes(cell, rows["bbox"].to_list(), rows["label"].to_list()))
            if len(images) == 3:
                break
        return gallery(images) if images else None

    return preview


@dg.multi_asset(
    outs=table_and_quarantine_outs(
        FRAME_VISIBILITY,
        "Per frame and object in view: 2D box (0..1000 grid and pixels), visibility ratio "
        "(depth-buffer occlusion test), in-frame share, truncated, occluded, camera position.",
        DGE_CODE_VERSION,
        "Frames whose files could not be read when computing visibility.",
    ),
    ins={SCENE_GEOMETRY: dg.AssetIn(), "rgbd_frames": dg.AssetIn(), "rgbd_scenes": dg.AssetIn()},
    partitions_def=scenes_partitions,
    check_specs=contract_check_specs(FRAME_VISIBILITY),
    group_name=GROUP,
    backfill_policy=SINGLE_RUN,
)
def frame_visibility_asset(
    context: dg.AssetExecutionContext,
    config: FrameVisibilityAssetConfig,
    storage: StorageResource,
    workers: WorkersResource,
    scene_geometry: PartitionFiles,
    rgbd_frames: PartitionFiles,
    rgbd_scenes: PartitionFiles,
) -> Iterator[dg.Output | dg.AssetCheckResult]:
    """Every measured object in every used frame of each scan: one ray cast per frame against the scan's
    segmented mesh when it has one, else its points projected with a depth-buffer test."""
    settings = VisibilitySettings.model_validate(config.model_dump())
    plans = table_file_plans(context, storage.path)
    arguments = {
        scene_id: (
            scene_id,
            settings,
            scene_geometry[scene_id],
            rgbd_frames[scene_id],
            rgbd_scenes[scene_id],
            plans,
        )
        for scene_id in context.partition_keys
    }
    with partition_results(frame_visibility_partition, arguments, workers.count()) as result:
        yield from run_partitions(context, lambda scene_id: restore_events(result(scene_id)), plans)


def _geometry_row(geometry_file: Path, scene_id: str) -> dict:
    """The ``scene_geometry`` row of one scan, points as numpy arrays (a failure naming the scan when it has none)."""
    rows = read_partition(geometry_file).filter(pl.col("scene_id") == scene_id)
    if rows.height == 0:
        raise dg.Failure(description=f"scene_geometry has no row for scene {scene_id}")
    return row_with_arrays(rows)


def frame_visibility_partition(
    scene_id: str,
    config: VisibilitySettings,
    geometry_file: Path,
    frames_file: Path,
    scenes_file: Path,
    plans: Mapping[str, TableFilePlan],
) -> list[PortableEvent]:
    """One scan of ``frame_visibility``: its files written, its events as :func:`portable_events` (the
    files: the scan's ``scene_geometry``, ``rgbd_frames`` and ``rgbd_scenes``)."""
    geometry = ScanGeometry.from_row(_geometry_row(geometry_file, scene_id))
    scene_frames = read_partition(frames_file)
    scenes = read_partition(scenes_file).filter(pl.col("scene_id") == scene_id)
    scene = scenes.row(0, named=True) if scenes.height else None
    log = QuarantineLog(FRAME_VISIBILITY)
    frame = build_frame_visibility(geometry, scene_frames, config, log, scene=scene)
    checked = finalize_table(
        frame,
        frame_visibility_contract.FrameVisibility,
        frame_visibility_contract.CONTRACT_VERSION,
        asset_key=FRAME_VISIBILITY,
        quarantine=log,
        record_id_column="frame_index",
        preview_columns=[
            "frame_index",
            "object_id",
            "label",
            "visibility_ratio",
            "in_frame_ratio",
            "truncated",
            "occluded",
            "bbox",
        ],
        preview_image=_visibility_preview(scene_frames),
        extra_metadata={
            "frames": int(frame["frame_index"].n_unique()) if frame.height else 0,
            "objects_in_view_per_frame": round(frame.height / max(1, len(geometry.used_frames)), 2),
            "mean_visibility_ratio": round(_column_mean(frame, "visibility_ratio"), 4)
            if frame.height
            else 0.0,
            "occluded_share": round(_column_mean(frame, "occluded"), 4) if frame.height else 0.0,
            "truncated_share": round(_column_mean(frame, "truncated"), 4) if frame.height else 0.0,
        },
    )
    quarantine, metadata = quarantine_output(log)
    events = [
        dg.Output(checked.frame, output_name=FRAME_VISIBILITY, metadata=checked.metadata),
        checked.check,
        dg.Output(quarantine, output_name=f"{FRAME_VISIBILITY}_quarantine", metadata=metadata),
    ]
    return portable_events(write_outputs(events, plans, scene_id))


_ASKED_OBJECT_KEYS = ("object_id", "objects", "standing", "facing", "target", "anchor", "choices")
"""Keys of a task's ``facts.spec`` that name the objects it asks about (object ids)."""


def asked_object_ids(facts: str | None) -> list[int]:
    """Ids of the objects a DGE task asks about, in the order its facts name them.

    From the spec (``object_id``, ``objects``, ``standing``/``facing``/``target``, ``anchor``/``choices``)
    and, for counts, the counted ``values.object_ids``.

    >>> asked_object_ids('{"spec": {"anchor": 2, "choices": [3, 0, 2], "frames": [0]}}')
    [2, 3, 0]
    >>> asked_object_ids('{"spec": {"frames": [0], "label": "box"}, "values": {"object_ids": [3]}}')
    [3]
    >>> asked_object_ids('{"spec": {"frames": [1, 0]}}')
    []
    """
    parsed = json.loads(facts) if facts else {}
    spec, values = parsed.get("spec") or {}, parsed.get("values") or {}
    named = [spec.get(key) for key in _ASKED_OBJECT_KEYS] + [values.get("object_ids")]
    ids: list[int] = []
    for value in named:
        for item in value if isinstance(value, list) else [value]:
            if isinstance(item, int) and not isinstance(item, bool) and item not in ids:
                ids.append(item)
    return ids


def _preview_tasks(tasks: pl.DataFrame, boxed: set[tuple[int, int]], count: int) -> list[dict]:
    """Up to ``count`` tasks to show: distinct first frames and task types first, boxed objects first.

    ``boxed`` holds the ``(frame_index, object_id)`` pairs that have a box in ``frame_visibility``.
    """
    rows = list(tasks.iter_rows(named=True))
    for row in rows:
        frame = row["frame_indices"][0]
        row["_boxes"] = sum((frame, object_id) in boxed for object_id in asked_object_ids(row["facts"]))
    rows.sort(key=lambda row: row["_boxes"] == 0)  # stable: tasks with boxes to draw first
    chosen: list[dict] = []
    rules = [
        lambda row, frames, types: row["frame_indices"][0] not in frames and row["task_type"] not in types,
        lambda row, frames, types: row["frame_indices"][0] not in frames,
        lambda row, frames, types: row["task_type"] not in types,
        lambda row, frames, types: True,
    ]
    for rule in rules:
        for row in rows:
            if len(chosen) == count:
                return chosen
            frames = {picked["frame_indices"][0] for picked in chosen}
            types = {picked["task_type"] for picked in chosen}
            if not any(row is picked for picked in chosen) and rule(row, frames, types):
                chosen.append(row)
    return chosen


def _tasks_preview(frame_visibility: pl.DataFrame, count: int = 3):
    """Preview of a scan's tasks: ``count`` tasks on distinct frames (and task types, where the scan has
    enough), each on its first image with the objects it asks about boxed and labelled (boxes from
    ``frame_visibility``) under a caption naming the task type."""
    visible = frame_visibility.filter(pl.col("bbox").is_not_null())
    boxes = {
        (row["frame_index"], row["object_id"]): (row["bbox"], row["label"])
        for row in visible.iter_rows(named=True)
    }

    def preview(tasks: pl.DataFrame):
        images = []
        for row in _preview_tasks(tasks, set(boxes), count):
            frame = row["frame_indices"][0]
            shown = [boxes[(frame, i)] for i in asked_object_ids(row["facts"]) if (frame, i) in boxes]
            image = draw_boxes(row["images"][0], [box for box, _ in shown], [label for _, label in shown])
            images.append(with_caption(image, f"{row['task_type']} (frame {frame})"))
        return gallery(images) if images else None

    return preview


@dg.multi_asset(
    outs=table_and_quarantine_outs(
        DGE_TASKS,
        "Exact spatial questions for 16 DGE task types from the scan's geometry, with frames, "
        "options or numeric answer with unit, and the justifying facts (JSON).",
        DGE_TASKS_CODE_VERSION,
        "Generated questions that broke the dge_tasks contract.",
    ),
    ins={SCENE_GEOMETRY: dg.AssetIn(), FRAME_VISIBILITY: dg.AssetIn(), "rgbd_frames": dg.AssetIn()},
    partitions_def=scenes_partitions,
    check_specs=contract_check_specs(DGE_TASKS),
    group_name=GROUP,
    backfill_policy=SINGLE_RUN,
)
def dge_tasks_asset(
    context: dg.AssetExecutionContext,
    config: DgeTasksAssetConfig,
    storage: StorageResource,
    workers: WorkersResource,
    scene_geometry: PartitionFiles,
    frame_visibility: PartitionFiles,
    rgbd_frames: PartitionFiles,
) -> Iterator[dg.Output | dg.AssetCheckResult]:
    """Generate each scan's unambiguous questions with exact answers."""
    settings = TaskSettings.model_validate(config.model_dump())
    plans = table_file_plans(context, storage.path)
    arguments = {
        scene_id: (
            scene_id,
            settings,
            scene_geometry[scene_id],
            frame_visibility[scene_id],
            rgbd_frames[scene_id],
            plans,
        )
        for scene_id in context.partition_keys
    }
    with partition_results(dge_tasks_partition, arguments, workers.count()) as result:
        yield from run_partitions(context, lambda scene_id: restore_events(result(scene_id)), plans)


def dge_tasks_partition(
    scene_id: str,
    config: TaskSettings,
    geometry_file: Path,
    visibility_file: Path,
    frames_file: Path,
    plans: Mapping[str, TableFilePlan],
) -> list[PortableEvent]:
    """One scan of ``dge_tasks``: its files written, its events as :func:`portable_events` (the files: the
    scan's ``scene_geometry``, ``frame_visibility`` and ``rgbd_frames``)."""
    geometry_row = _geometry_row(geometry_file, scene_id)
    frame_visibility = read_partition(visibility_file)
    scene_frames = read_partition(frames_file)
    log = QuarantineLog(DGE_TASKS)
    report = GenerationReport()
    tasks = build_scene_tasks(geometry_row, frame_visibility, scene_frames, config, log, report)
    missing = report.missing(config.task_types)
    for task_type, why in missing.items():  # also in the metadata (missing_task_types)
        logger.info("scene %s: no %s question: %s", scene_id, task_type, why)
    checked = finalize_table(
        tasks,
        dge_tasks_contract.DgeTasks,
        dge_tasks_contract.CONTRACT_VERSION,
        asset_key=DGE_TASKS,
        quarantine=log,
        preview_columns=["task_type", "frame_indices", "question", "options", "answer", "unit", "split"],
        preview_image=_tasks_preview(frame_visibility),
        extra_metadata={
            "task_types": json_metadata(value_counts(tasks, "task_type")),
            "splits": json_metadata(value_counts(tasks, "split")),
            "candidates": json_metadata(report.candidates),
            "withheld": json_metadata(report.withheld),
            "near_duplicates": json_metadata(report.duplicates),
            "missing_task_types": json_metadata(missing),
        },
    )
    quarantine, metadata = quarantine_output(log)
    events = [
        dg.Output(checked.frame, output_name=DGE_TASKS, metadata=checked.metadata),
        checked.check,
        dg.Output(quarantine, output_name=f"{DGE_TASKS}_quarantine", metadata=metadata),
    ]
    return portable_events(write_outputs(events, plans, scene_id))


@dg.multi_asset(
    outs=table_and_quarantine_outs(
        DGE_IMAGE_TASKS,
        "DGE questions about single images (Visual Genome-like scene graphs) from estimated depth "
        "(a depth file or a monocular depth model); every row is flagged geometry_source='estimated'.",
        DGE_TASKS_CODE_VERSION,
        "Images whose depth could not be read, and rows that broke the contract.",
    ),
    ins={"scene_graphs": dg.AssetIn()},
    check_specs=contract_check_specs(DGE_IMAGE_TASKS),
    group_name=GROUP,
)
def dge_image_tasks_asset(
    context: dg.AssetExecutionContext,
    config: DgeImageTasksAssetConfig,
    storage: StorageResource,
    scene_graphs: TableFile,
) -> Iterator[dg.Output | dg.AssetCheckResult]:
    """Single-image mode: ordinal (and, with metric depth, metric) questions from estimated geometry (the scene
    graphs read and the questions written a row group at a time)."""
    log = QuarantineLog(DGE_IMAGE_TASKS)
    plan = table_file_plans(context, storage.path)[DGE_IMAGE_TASKS]
    table = StreamedTable(
        dge_tasks_contract.DgeTasks,
        dge_tasks_contract.CONTRACT_VERSION,
        asset_key=DGE_IMAGE_TASKS,
        quarantine=log,
        preview_columns=["task_type", "question", "options", "answer", "unit"],
    )
    task_types: Counter[str] = Counter()
    schema = polars_schema(dge_tasks_contract.DgeTasks)
    with plan.writer(None, schema, dge_tasks_contract.CONTRACT_VERSION) as out:
        if config.enabled:
            for images in iter_row_groups(scene_graphs):
                valid = table.check(single_image_tasks(images, config, log))
                task_types.update(valid["task_type"].to_list())
                out.write(valid)
        else:
            context.log.info(
                "dge_image_tasks: no depth_dir or depth_model_path configured; no single-image questions"
            )
    metadata, check = table.finish(
        {
            "depth_source": "model" if config.depth_model_path else ("files" if config.depth_dir else "none"),
            "task_types": json_metadata(dict(sorted(task_types.items()))),
            **(
                {} if config.enabled else {EMPTY_REASON_KEY: "off until depth_dir or depth_model_path is set"}
            ),
        }
    )
    yield dg.Output(plan.written(None), output_name=DGE_IMAGE_TASKS, metadata=metadata)
    yield check
    quarantine, quarantine_metadata = quarantine_output(log)
    yield dg.Output(quarantine, output_name=f"{DGE_IMAGE_TASKS}_quarantine", metadata=quarantine_metadata)


DGE_ASSETS = [scene_geometry_asset, frame_visibility_asset, dge_tasks_asset, dge_image_tasks_asset]
"""Everything to register in the ``Definitions`` (resources: ``io_manager``, ``storage``)."""
