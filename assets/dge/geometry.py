"""One scene's geometry, end to end: fusion, floor, gravity frame, room, objects; and its table row.

:func:`build_scan_geometry` takes a scene's ``rgbd_frames`` rows (a polars frame) and its
``rgbd_scenes`` row and returns a :class:`ScanGeometry`; bad frames and unmeasurable objects go to
the quarantine log, and a scene with no usable frame raises :class:`SceneBuildError`.
:meth:`ScanGeometry.to_row` / :meth:`ScanGeometry.from_row` convert to and from a
``scene_geometry`` row, so later stages never redo the fusion.

>>> config = SceneGeometryConfig()
>>> config.object_points_source
'auto'
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
import open3d as o3d
import polars as pl

from assets.dge.camera import rotate_vectors, transform_points
from assets.dge.floor import (
    FloorConfig,
    FloorNotFoundError,
    FloorPlane,
    fit_floor_plane,
    gravity_transform,
    up_prior_from_poses,
)
from assets.dge.fusion import FrameRecord, FusionConfig, fuse_frames, voxel_downsample
from assets.dge.objects import (
    MeshSegmentationError,
    ObjectConfig,
    ObjectGeometry,
    ObjectRejectedError,
    measure_object,
    mesh_object_samples,
    voxel_point_areas,
)
from assets.dge.room import RoomGeometry, measure_room
from data_contracts.quarantine import QuarantineLog
from data_contracts.scene_geometry import SceneGeometry
from data_contracts.validation import polars_schema

logger = logging.getLogger(__name__)

OBJECT_PIXELS_PER_FRAME = 80_000
SCENE_PIXELS_PER_FRAME = 20_000


class SceneBuildError(RuntimeError):
    """A scene that cannot be built at all (no usable frame); the message names the scene and why."""


@dataclass(frozen=True)
class SceneGeometryConfig:
    """Settings of :func:`build_scan_geometry`.

    Args:
        fusion (`FusionConfig`): back-projection and voxel sizes. Its ``pixel_stride`` is used as given
            when ``auto_stride`` is False.
        floor (`FloorConfig`): floor RANSAC.
        objects (`ObjectConfig`): object sampling, cleaning and storage.
        object_points_source (`str`, *optional*, defaults to ``"auto"``): ``"mesh"`` (segmented mesh),
            ``"instance_masks"`` (fused frame points) or ``"auto"`` (the mesh when the scan has one).
        auto_stride (`bool`, *optional*, defaults to True): choose the pixel stride so that about
            80,000 depth pixels per frame are back-projected when objects come from the frames
            (640x480 -> 2, 320x240 -> 1), and about 20,000 when only the scene cloud does (640x480 -> 4).
        stored_cloud_voxel_m (`float`, *optional*, defaults to 0.05): voxel size of the stored cloud copy.
        room_floor_threshold_m (`float`, *optional*, defaults to 0.03): floor points lie this close to z = 0.
        cloud_outlier_neighbors (`int`, *optional*, defaults to 12): statistical outlier test of the scene cloud.
        cloud_outlier_std_ratio (`float`, *optional*, defaults to 3.0): its threshold.
    """

    fusion: FusionConfig = field(default_factory=FusionConfig)
    floor: FloorConfig = field(default_factory=FloorConfig)
    objects: ObjectConfig = field(default_factory=ObjectConfig)
    object_points_source: Literal["auto", "mesh", "instance_masks"] = "auto"
    auto_stride: bool = True
    stored_cloud_voxel_m: float = 0.05
    room_floor_threshold_m: float = 0.03
    cloud_outlier_neighbors: int = 12
    cloud_outlier_std_ratio: float = 3.0


@dataclass
class ScanGeometry:
    """A scene's geometry in its gravity-aligned frame (see ``data_contracts.scene_geometry``)."""

    scene_id: str
    object_points_source: str
    world_to_gravity: np.ndarray
    floor: FloorPlane
    floor_source: str
    room: RoomGeometry
    cloud_voxel_size_m: float
    cloud_points: np.ndarray
    cloud_colors: np.ndarray | None
    used_frames: list[int]
    num_quarantined_frames: int
    objects: list[ObjectGeometry]
    dropped_objects: list[dict[str, Any]] = field(default_factory=list)

    def to_row(self) -> dict[str, Any]:
        """The ``scene_geometry`` row."""
        world_up = np.array([0.0, 0.0, 1.0])
        return {
            "scene_id": self.scene_id,
            "geometry_source": "scanned",
            "object_points_source": self.object_points_source,
            "world_to_gravity": self.world_to_gravity.reshape(-1).tolist(),
            "floor_source": self.floor_source,
            "floor_normal": self.floor.normal.tolist(),
            "floor_offset": float(self.floor.offset),
            "floor_tilt_deg": self.floor.tilt_deg(world_up),
            "floor_inliers": int(self.floor.inlier_count),
            "floor_rmse_m": float(self.floor.inlier_rmse),
            "room_length_m": self.room.length_m,
            "room_width_m": self.room.width_m,
            "room_height_m": self.room.height_m,
            "room_area_m2": self.room.area_m2,
            "floor_area_m2": self.room.floor_area_m2,
            "room_footprint": self.room.footprint.astype(np.float32).reshape(-1).tolist(),
            "cloud_voxel_size_m": self.cloud_voxel_size_m,
            "num_cloud_points": len(self.cloud_points),
            "cloud_points": self.cloud_points.astype(np.float32).reshape(-1).tolist(),
            "cloud_colors": None
            if self.cloud_colors is None
            else self.cloud_colors.astype(np.uint8).reshape(-1).tolist(),
            "used_frames": list(self.used_frames),
            "num_quarantined_frames": self.num_quarantined_frames,
            "num_objects": len(self.objects),
            "objects": [_object_struct(obj) for obj in self.objects],
            "dropped_objects": list(self.dropped_objects),
        }

    def to_frame(self) -> pl.DataFrame:
        """The one-row ``scene_geometry`` frame."""
        return pl.DataFrame([self.to_row()], schema=polars_schema(SceneGeometry))

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> ScanGeometry:
        """Rebuild from a ``scene_geometry`` row (a dict)."""
        floor = FloorPlane(
            normal=np.asarray(row["floor_normal"], dtype=np.float64),
            offset=float(row["floor_offset"]),
            inlier_count=int(row["floor_inliers"]),
            inlier_rmse=float(row["floor_rmse_m"]),
        )
        footprint = np.asarray(row["room_footprint"], dtype=np.float64).reshape(-1, 2)
        room = RoomGeometry(
            length_m=float(row["room_length_m"]),
            width_m=float(row["room_width_m"]),
            height_m=float(row["room_height_m"]),
            area_m2=float(row["room_area_m2"]),
            floor_area_m2=float(row["floor_area_m2"]),
            yaw=0.0,
            footprint=footprint,
        )
        colors = row.get("cloud_colors")
        return cls(
            scene_id=str(row["scene_id"]),
            object_points_source=str(row["object_points_source"]),
            world_to_gravity=np.asarray(row["world_to_gravity"], dtype=np.float64).reshape(4, 4),
            floor=floor,
            floor_source=str(row["floor_source"]),
            room=room,
            cloud_voxel_size_m=float(row["cloud_voxel_size_m"]),
            cloud_points=np.asarray(row["cloud_points"], dtype=np.float64).reshape(-1, 3),
            cloud_colors=None if colors is None else np.asarray(colors, dtype=np.uint8).reshape(-1, 3),
            used_frames=[int(index) for index in row["used_frames"]],
            num_quarantined_frames=int(row["num_quarantined_frames"]),
            objects=[_object_from_struct(item) for item in row["objects"]],
            dropped_objects=[dict(item) for item in row["dropped_objects"]],
        )


def _object_struct(obj: ObjectGeometry) -> dict[str, Any]:
    return {
        "object_id": obj.object_id,
        "label": obj.label,
        "point_count": obj.point_count,
        "centroid": obj.centroid.tolist(),
        "aabb_min": obj.aabb_min.tolist(),
        "aabb_max": obj.aabb_max.tolist(),
        "obb_center": obj.obb_center.tolist(),
        "obb_extents": obj.obb_extents.tolist(),
        "obb_yaw": float(obj.obb_yaw),
        "size_m": obj.size,
        "points": obj.points.astype(np.float32).reshape(-1).tolist(),
        "normals": np.nan_to_num(obj.normals, nan=0.0).astype(np.float32).reshape(-1).tolist(),
        "point_areas": obj.point_areas.astype(np.float32).tolist(),
    }


def _object_from_struct(item: Mapping[str, Any]) -> ObjectGeometry:
    return ObjectGeometry(
        object_id=int(item["object_id"]),
        label=str(item["label"]),
        point_count=int(item["point_count"]),
        centroid=np.asarray(item["centroid"], dtype=np.float64),
        aabb_min=np.asarray(item["aabb_min"], dtype=np.float64),
        aabb_max=np.asarray(item["aabb_max"], dtype=np.float64),
        obb_center=np.asarray(item["obb_center"], dtype=np.float64),
        obb_extents=np.asarray(item["obb_extents"], dtype=np.float64),
        obb_yaw=float(item["obb_yaw"]),
        points=np.asarray(item["points"], dtype=np.float64).reshape(-1, 3),
        normals=np.asarray(item["normals"], dtype=np.float64).reshape(-1, 3),
        point_areas=np.asarray(item["point_areas"], dtype=np.float64),
    )


def auto_pixel_stride(
    depth_width: int, depth_height: int, target_pixels: int = OBJECT_PIXELS_PER_FRAME
) -> int:
    """Pixel stride that back-projects about ``target_pixels`` depth pixels per frame.

    >>> auto_pixel_stride(640, 480), auto_pixel_stride(320, 240), auto_pixel_stride(640, 480, SCENE_PIXELS_PER_FRAME)
    (2, 1, 4)
    """
    return max(1, round(math.sqrt(depth_width * depth_height / target_pixels)))


def frame_records(frames: pl.DataFrame, quarantine: QuarantineLog | None = None) -> list[FrameRecord]:
    """Parse ``rgbd_frames`` rows into :class:`FrameRecord` (sorted by frame index); unparseable rows are quarantined."""
    records = []
    for row in frames.sort("frame_index").iter_rows(named=True):
        try:
            records.append(FrameRecord.from_row(row))
        except (ValueError, TypeError, KeyError) as error:
            if quarantine is not None:
                quarantine.add(
                    f"{row.get('scene_id')}/{row.get('frame_index')}",
                    f"bad frame row: {error}",
                    source_file=row.get("depth_path"),
                )
    return records


def _has_mesh_segmentation(scene: Mapping[str, Any]) -> bool:
    paths = [scene.get("mesh_path"), scene.get("segs_path"), scene.get("aggregation_path")]
    return all(path is not None and Path(path).exists() for path in paths)


def choose_object_source(scene: Mapping[str, Any], records: list[FrameRecord], preference: str) -> str:
    """Where object points come from: ``mesh``, ``instance_masks`` or ``none`` (see :class:`SceneGeometryConfig`)."""
    has_mesh = _has_mesh_segmentation(scene)
    has_masks = any(record.instance_path is not None for record in records)
    if preference == "mesh":
        return "mesh" if has_mesh else "none"
    if preference == "instance_masks":
        return "instance_masks" if has_masks else "none"
    if has_mesh:
        return "mesh"
    return "instance_masks" if has_masks else "none"


def _remove_cloud_outliers(points: np.ndarray, colors: np.ndarray | None, config: SceneGeometryConfig):
    if len(points) <= config.cloud_outlier_neighbors:
        return points, colors
    cloud = o3d.geometry.PointCloud(o3d.utility.Vector3dVector(points))
    _, kept = cloud.remove_statistical_outlier(
        nb_neighbors=config.cloud_outlier_neighbors, std_ratio=config.cloud_outlier_std_ratio
    )
    kept = np.asarray(kept, dtype=np.int64)
    return points[kept], (None if colors is None else colors[kept])


def _fallback_floor(points: np.ndarray, up: np.ndarray) -> FloorPlane:
    heights = points @ up
    return FloorPlane(normal=up, offset=-float(np.percentile(heights, 1.0)), inlier_count=0, inlier_rmse=0.0)


def build_scan_geometry(
    frames: pl.DataFrame,
    scene: Mapping[str, Any],
    config: SceneGeometryConfig = SceneGeometryConfig(),
    quarantine: QuarantineLog | None = None,
    progress: bool = False,
) -> ScanGeometry:
    """Build one scene's geometry from its ``rgbd_frames`` rows and ``rgbd_scenes`` row.

    Bad frames and objects are added to ``quarantine`` (``source_asset`` is the log's); raises
    :class:`SceneBuildError` when no frame is usable.
    """
    log = quarantine if quarantine is not None else QuarantineLog("scene_geometry")
    scene_id = str(scene["scene_id"])
    records = frame_records(frames.filter(pl.col("scene_id") == scene_id), log)
    if not records:
        raise SceneBuildError(f"scene {scene_id} has no usable frame: rgbd_frames has no row for it")
    fusion = config.fusion
    source = choose_object_source(scene, records, config.object_points_source)
    if config.auto_stride:
        width, height = records[0].depth_size
        target = OBJECT_PIXELS_PER_FRAME if source == "instance_masks" else SCENE_PIXELS_PER_FRAME
        fusion = FusionConfig(**{**fusion.__dict__, "pixel_stride": auto_pixel_stride(width, height, target)})
    fused = fuse_frames(records, fusion, with_instances=source == "instance_masks", progress=progress)
    for record_id, source_file, reason in fused.failures:
        log.add(record_id, reason, source_file=source_file)
    if not fused.used_frames:
        reasons = sorted({reason.split(":", 1)[0] for _, _, reason in fused.failures})
        raise SceneBuildError(
            f"scene {scene_id} has no usable frame: all {len(records)} frames were quarantined ({'; '.join(reasons)})"
        )
    used_poses = [record.pose for record in records if record.frame_index in set(fused.used_frames)]
    up = up_prior_from_poses(used_poses)
    floor_source = "ransac"
    try:
        floor = fit_floor_plane(fused.points, fused.normals, up, config.floor)
    except FloorNotFoundError as error:
        logger.warning(
            "scene %s: %s; using the lowest points along the cameras' up direction", scene_id, error
        )
        floor = _fallback_floor(fused.points, up)
        floor_source = "fallback"
    world_to_gravity = gravity_transform(floor)
    cloud = transform_points(world_to_gravity, fused.points)
    cloud, colors = _remove_cloud_outliers(cloud, fused.colors, config)
    room = measure_room(cloud, config.room_floor_threshold_m)
    stored_points, _, stored_colors = voxel_downsample(cloud, config.stored_cloud_voxel_m, colors=colors)

    labels = {int(item["object_id"]): str(item["label"]) for item in (scene.get("objects") or [])}
    objects: list[ObjectGeometry] = []
    dropped: list[dict[str, Any]] = []

    def drop(object_id: int, label: str, reason: str, source_file: str | None) -> None:
        dropped.append({"object_id": object_id, "label": label, "reason": reason})
        log.add(f"{scene_id}/object/{object_id}", reason, source_file=source_file, payload={"label": label})

    candidates: list[tuple[int, str, np.ndarray, np.ndarray, np.ndarray]] = []
    if source == "mesh":
        try:
            samples = mesh_object_samples(
                scene["mesh_path"], scene["segs_path"], scene["aggregation_path"], config.objects
            )
        except MeshSegmentationError as error:
            logger.warning("scene %s: %s; falling back to instance masks", scene_id, error)
            log.add(
                f"{scene_id}/mesh", f"unusable mesh segmentation: {error}", source_file=scene.get("mesh_path")
            )
            samples = []
        for sample in samples:
            label = labels.get(sample.object_id, sample.label)
            areas = np.full(len(sample.points), sample.area / max(len(sample.points), 1))
            candidates.append(
                (
                    sample.object_id,
                    label,
                    transform_points(world_to_gravity, sample.points),
                    rotate_vectors(world_to_gravity, sample.normals),
                    areas,
                )
            )
    elif source == "instance_masks":
        for object_id, (points, normals) in sorted(fused.object_points.items()):
            if object_id not in labels:
                drop(
                    object_id,
                    f"object_{object_id}",
                    "instance id not in the scene's object list",
                    scene.get("aggregation_path"),
                )
                continue
            candidates.append(
                (
                    object_id,
                    labels[object_id],
                    transform_points(world_to_gravity, points),
                    rotate_vectors(world_to_gravity, normals),
                    voxel_point_areas(normals, fusion.object_voxel_size_m),
                )
            )
    seen = {candidate[0] for candidate in candidates}
    source_file = scene.get("mesh_path") if source == "mesh" else scene.get("scene_dir")
    for object_id, label, points, normals, areas in candidates:
        if len(points) == 0:
            drop(object_id, label, "no points: the object has no surface in the segmentation", source_file)
            continue
        try:
            objects.append(measure_object(object_id, label, points, normals, areas, config.objects))
        except ObjectRejectedError as error:
            drop(object_id, label, str(error), source_file)
    for object_id, label in sorted(labels.items()):
        if object_id not in seen and source != "none":
            drop(object_id, label, "no points: never seen in a usable frame", source_file)
    logger.info(
        "scene %s: %d frames used, %d quarantined, %d objects measured, %d dropped",
        scene_id,
        len(fused.used_frames),
        len(fused.failures),
        len(objects),
        len(dropped),
    )
    return ScanGeometry(
        scene_id=scene_id,
        object_points_source=source,
        world_to_gravity=world_to_gravity,
        floor=floor,
        floor_source=floor_source,
        room=room,
        cloud_voxel_size_m=config.stored_cloud_voxel_m,
        cloud_points=stored_points,
        cloud_colors=stored_colors,
        used_frames=list(fused.used_frames),
        num_quarantined_frames=len(fused.failures),
        objects=objects,
        dropped_objects=dropped,
    )


def camera_poses_in_gravity(geometry: ScanGeometry, records: list[FrameRecord]) -> dict[int, np.ndarray]:
    """Camera-to-gravity-frame poses of the frames ``geometry`` used, by frame index."""
    used = set(geometry.used_frames)
    return {
        record.frame_index: geometry.world_to_gravity @ record.pose
        for record in records
        if record.frame_index in used
    }
