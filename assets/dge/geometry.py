"""One scene's geometry, end to end: fusion, floor, gravity frame, room, objects; and its table row.

:func:`build_scan_geometry` takes a scene's ``rgbd_frames`` rows (a polars frame) and its
``rgbd_scenes`` row and returns a :class:`ScanGeometry`; bad frames and unmeasurable objects go to
the quarantine log, and a scene with no usable frame raises :class:`SceneBuildError`.
:meth:`ScanGeometry.to_row` / :meth:`ScanGeometry.from_row` convert to and from a
``scene_geometry`` row, so later stages never redo the fusion.

Object points come from an :class:`ObjectSource`: :class:`MeshObjects` (points sampled on the
segmented mesh), :class:`InstanceMaskObjects` (fused frame points labelled by the instance masks),
:class:`AnnotatedBoxObjects` (the mesh's or the fused cloud's points inside each annotated oriented box)
or :class:`NoObjects`; :func:`choose_object_source` picks one from the settings and what the scan
has. Where the data set says which way is up (``rgbd_scenes.world_up``: ARKitScenes, ScanNet++), the
floor's normal is that axis and only its height is found.

:class:`SceneGeometrySettings` holds every knob: its fields are the asset's run configuration (what a user sets per data set: the object source, the pixel stride, the depth range, colours, object
point counts, the seed), its ``ClassVar`` attributes (and those of the stage settings it extends) the
method's constants (voxel sizes, RANSAC, outlier tests, faces, margins), which are not run
configuration.

>>> settings = SceneGeometrySettings()
>>> settings.object_points_source, settings.pixel_stride, settings.floor_distance_threshold_m
('auto', 0, 0.02)
>>> sorted(SceneGeometrySettings.model_fields)  # the run configuration
['max_depth_m', 'max_keyframes', 'max_stored_points', 'min_depth_m', 'min_object_points', 'object_points_source', 'pixel_stride', 'seed', 'store_cloud_colors']
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal, Protocol

import numpy as np
import polars as pl
from pydantic import Field

from assets.dge.camera import rotate_vectors, transform_points
from assets.dge.confidence import (
    CameraView,
    ConfidenceSettings,
    DepthBuffer,
    measurement_confidence,
    support_gap,
)
from assets.dge.floor import (
    GRAVITY_FROM_WORLD_UP,
    FloorNotFoundError,
    FloorPlane,
    FloorSettings,
    fit_floor_plane,
    gravity_transform,
    scan_gravity,
    up_prior_from_poses,
)
from assets.dge.fusion import (
    FrameRecord,
    FusedScene,
    FusionSettings,
    fuse_frames,
    voxel_downsample,
    voxel_indices,
)
from assets.dge.keyframes import KeyframeSettings, keyframe_indices
from assets.dge.objects import (
    AnnotatedBox,
    MeshSegmentationError,
    ObjectGeometry,
    ObjectRejectedError,
    ObjectSettings,
    measure_object,
    mesh_object_samples,
    mesh_samples_near_box,
    points_in_box,
    raise_top_to_masks,
    read_mesh,
    statistical_inliers,
    voxel_point_areas,
)
from assets.dge.room import RoomGeometry, measure_room
from data_contracts.quarantine import QuarantineLog
from data_contracts.scene_geometry import SceneGeometry
from data_contracts.validation import polars_schema

logger = logging.getLogger(__name__)


class SceneBuildError(RuntimeError):
    """A scene that cannot be built at all (no usable frame); the message names the scene and why."""


class SceneGeometrySettings(
    FusionSettings, FloorSettings, ObjectSettings, ConfidenceSettings, KeyframeSettings
):
    """Settings of :func:`build_scan_geometry`: fusion, floor, object and confidence settings plus the scene's own.

    It *is a* :class:`~assets.dge.fusion.FusionSettings`, :class:`~assets.dge.floor.FloorSettings`,
    :class:`~assets.dge.objects.ObjectSettings` and :class:`~assets.dge.confidence.ConfidenceSettings`,
    so each stage reads its knobs from it. The fields are the run configuration of ``scene_geometry``;
    the ``ClassVar`` attributes here and in the stage settings (the keyframes: :class:`~assets.dge.keyframes.KeyframeSettings`) are the method's constants, not run
    configuration. A test or benchmark that needs other constants passes an instance of a subclass that
    overrides them (``class FewSamples(SceneGeometrySettings): mesh_min_samples = 100``).
    """

    object_points_source: Literal["auto", "mesh", "instance_masks", "annotated_boxes"] = Field(
        default="auto",
        description="Object points from the segmented mesh, the frames' instance masks, the annotated oriented "
        "boxes (the mesh's or the fused cloud's points inside each), or auto (the first the scan has, in that "
        "order).",
    )
    seed: int = Field(
        default=0,
        description="Seed of the floor's RANSAC, of mesh sampling and of the seeded subsamples (the same seed "
        "gives the same geometry).",
    )

    # Constants of the method (not run configuration; a test may override them in a subclass).
    stored_cloud_voxel_m: ClassVar[float] = 0.05
    """Voxel size of the stored copy of the cloud."""
    room_floor_threshold_m: ClassVar[float] = 0.03
    """Floor points lie this close to z = 0 (floor area of the room)."""
    room_trim_share: ClassVar[float] = 0.002
    """The room is measured without this share of the cloud's points at each side of its rectangle and at the
    top (depth noise on far walls)."""
    room_min_wall_cover: ClassVar[float] = 0.25
    """A dense vertical slab near a side of the room is its wall when its points cover at least this share of
    the side (0.2 m cells over its length and the wall band's height): walls seen even in part cover 0.4-1,
    the edge of a table or of a partial capture's view 0.02-0.08 (:func:`assets.dge.room.wall_rectangle`)."""
    cloud_outlier_neighbors: ClassVar[int] = 12
    """Neighbours of the statistical outlier test of the scene cloud."""
    cloud_outlier_std_ratio: ClassVar[float] = 3.0
    """Threshold (standard deviations) of the scene cloud's outlier test."""
    cloud_outlier_voxel_m: ClassVar[float] = 0.06
    """The scene cloud's outlier test runs on the centres of voxels of this size (a point goes with its
    voxel): stray depth readings stay alone in their voxel, and the test costs a few times less than on
    every point. 0 tests every point."""


DEFAULT_SCENE_GEOMETRY_SETTINGS = SceneGeometrySettings()


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
            "room_walled_sides": int(self.room.walled_sides),
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
            walled_sides=int(row.get("room_walled_sides") or 0),
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
        "observed_views": int(obj.observed_views),
        "extent_coverage": float(obj.extent_coverage),
        "depth_noise_m": float(obj.depth_noise_m),
        "position_uncertainty_m": float(obj.position_uncertainty_m),
        "size_uncertainty_m": float(obj.size_uncertainty_m),
        "cut_off_views": int(obj.cut_off_views),
        "support_gap_m": float(obj.support_gap_m),
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
        observed_views=int(item.get("observed_views", 0)),
        extent_coverage=float(item.get("extent_coverage", 0.0)),
        depth_noise_m=float(item.get("depth_noise_m", 0.0)),
        position_uncertainty_m=float(item.get("position_uncertainty_m", np.inf)),
        size_uncertainty_m=float(item.get("size_uncertainty_m", np.inf)),
        cut_off_views=int(item.get("cut_off_views") or 0),
        support_gap_m=float(item.get("support_gap_m") or 0.0),
    )


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


@dataclass(frozen=True)
class ObjectCandidate:
    """An object's points before cleaning (gravity frame), with their normals and the area each stands for."""

    object_id: int
    label: str
    points: np.ndarray
    normals: np.ndarray
    point_areas: np.ndarray


@dataclass
class DroppedObjects:
    """Objects left out of a scan's geometry: listed in the geometry and added to the quarantine log."""

    scene_id: str
    log: QuarantineLog
    rows: list[dict[str, Any]] = field(default_factory=list)

    def drop(self, object_id: int, label: str, reason: str, source_file: str | None) -> None:
        """Leave an object out, with the reason and the file its points came from."""
        self.rows.append({"object_id": object_id, "label": label, "reason": reason})
        self.log.add(
            f"{self.scene_id}/object/{object_id}", reason, source_file=source_file, payload={"label": label}
        )


@dataclass(frozen=True)
class ScanContext:
    """What an object source reads: the scene's row and labels, the fused frames and the gravity transform."""

    scene_id: str
    scene: Mapping[str, Any]
    labels: dict[int, str]
    fused: FusedScene
    world_to_gravity: np.ndarray
    settings: SceneGeometrySettings
    log: QuarantineLog


class ObjectSource(Protocol):
    """Where a scan's object points come from (chosen by :func:`choose_object_source`)."""

    name: str
    """The ``object_points_source`` written in the table."""
    reads_instance_masks: bool
    """Whether fusion reads the frames' instance masks (and back-projects more pixels per frame)."""
    reports_unseen_objects: bool
    """Whether listed objects that got no points are dropped one by one with a reason."""
    complete_objects: bool
    """Whether an object's points are the whole object (a segmented mesh), not what the frames saw of it."""
    noisy_points: bool
    """Whether the points are fused from depth frames (settled onto their surface and trimmed when measured)."""

    def candidates(self, context: ScanContext, dropped: DroppedObjects) -> list[ObjectCandidate]:
        """The objects' points before cleaning, in object id order."""
        ...

    def source_file(self, scene: Mapping[str, Any]) -> str | None:
        """The file named when an object is dropped."""
        ...


class MeshObjects:
    """Points sampled on the scan's segmented mesh (every surface of each annotated object)."""

    name = "mesh"
    reads_instance_masks = False
    reports_unseen_objects = True
    complete_objects = True
    noisy_points = False

    def candidates(self, context: ScanContext, dropped: DroppedObjects) -> list[ObjectCandidate]:
        """Mesh samples in the gravity frame; an unusable segmentation is logged and gives no object."""
        scene = context.scene
        try:
            samples = mesh_object_samples(
                scene["mesh_path"], scene["segs_path"], scene["aggregation_path"], context.settings
            )
        except MeshSegmentationError as error:
            logger.warning("scene %s: %s; falling back to instance masks", context.scene_id, error)
            context.log.add(
                f"{context.scene_id}/mesh",
                f"unusable mesh segmentation: {error}",
                source_file=scene.get("mesh_path"),
            )
            samples = []
        return [
            ObjectCandidate(
                sample.object_id,
                context.labels.get(sample.object_id, sample.label),
                transform_points(context.world_to_gravity, sample.points),
                rotate_vectors(context.world_to_gravity, sample.normals),
                np.full(len(sample.points), sample.area / max(len(sample.points), 1)),
            )
            for sample in samples
        ]

    def source_file(self, scene: Mapping[str, Any]) -> str | None:
        """The mesh."""
        return scene.get("mesh_path")


class InstanceMaskObjects:
    """Fused frame points labelled by the frames' instance masks (what the cameras saw of each object)."""

    name = "instance_masks"
    reads_instance_masks = True
    reports_unseen_objects = True
    complete_objects = False
    noisy_points = True

    def candidates(self, context: ScanContext, dropped: DroppedObjects) -> list[ObjectCandidate]:
        """Per-object fused clouds in the gravity frame; instance ids missing from the object list are dropped."""
        candidates = []
        for object_id, (points, normals) in sorted(context.fused.object_points.items()):
            if object_id not in context.labels:
                dropped.drop(
                    object_id,
                    f"object_{object_id}",
                    "instance id not in the scene's object list",
                    context.scene.get("aggregation_path"),
                )
                continue
            candidates.append(
                ObjectCandidate(
                    object_id,
                    context.labels[object_id],
                    transform_points(context.world_to_gravity, points),
                    rotate_vectors(context.world_to_gravity, normals),
                    voxel_point_areas(normals, context.settings.object_voxel_size_m),
                )
            )
        return candidates

    def source_file(self, scene: Mapping[str, Any]) -> str | None:
        """The scan's folder."""
        return scene.get("scene_dir")


class AnnotatedBoxObjects:
    """The points inside each annotated oriented box (ARKitScenes): sampled on the scan's mesh when it has one
    (every surface the mesh holds), else the fused cloud's (what the frames saw); surfaces that only pass through
    a box (the floor or a support under it, a wall beside it) are left out (:func:`assets.dge.objects.points_in_box`)."""

    name = "annotated_boxes"
    reads_instance_masks = False
    reports_unseen_objects = True

    def __init__(self, mesh_path: str | None) -> None:
        self.mesh_path = mesh_path
        self.complete_objects = mesh_path is not None
        self.noisy_points = mesh_path is None

    def candidates(self, context: ScanContext, dropped: DroppedObjects) -> list[ObjectCandidate]:
        """Each box's points in the gravity frame; objects without a box are dropped."""
        settings = context.settings
        up = context.world_to_gravity[2, :3]  # the gravity frame's z axis in world coordinates
        mesh = None
        if self.mesh_path is not None:
            try:
                mesh = read_mesh(self.mesh_path)
            except MeshSegmentationError as error:
                logger.warning(
                    "scene %s: %s; the boxes take the fused cloud's points", context.scene_id, error
                )
                context.log.add(
                    f"{context.scene_id}/mesh", f"unusable mesh: {error}", source_file=self.mesh_path
                )
        candidates = []
        for item in context.scene.get("objects") or []:
            object_id, label = int(item["object_id"]), str(item["label"])
            if item.get("box") is None:
                dropped.drop(object_id, label, "no annotated box", context.scene.get("aggregation_path"))
                continue
            box = AnnotatedBox.from_struct(object_id, label, item["box"])
            if mesh is not None:
                points, normals, areas = mesh_samples_near_box(*mesh, box, settings)
            else:
                points = np.asarray(context.fused.points, dtype=np.float64)
                normals = np.asarray(context.fused.normals, dtype=np.float64)
                areas = voxel_point_areas(normals, settings.object_voxel_size_m)
            keep = (
                points_in_box(points, normals, box, up, settings) if len(points) else np.zeros(0, dtype=bool)
            )
            candidates.append(
                ObjectCandidate(
                    object_id,
                    label,
                    transform_points(context.world_to_gravity, points[keep]),
                    rotate_vectors(context.world_to_gravity, normals[keep]),
                    areas[keep],
                )
            )
        return candidates

    def source_file(self, scene: Mapping[str, Any]) -> str | None:
        """The annotation."""
        return scene.get("aggregation_path")


class NoObjects:
    """A scan with neither a segmented mesh nor instance masks: the room is measured, no object is."""

    name = "none"
    reads_instance_masks = False
    reports_unseen_objects = False
    complete_objects = False
    noisy_points = False

    def candidates(self, context: ScanContext, dropped: DroppedObjects) -> list[ObjectCandidate]:
        """No object."""
        return []

    def source_file(self, scene: Mapping[str, Any]) -> str | None:
        """The scan's folder."""
        return scene.get("scene_dir")


def _has_mesh_segmentation(scene: Mapping[str, Any]) -> bool:
    paths = [scene.get("mesh_path"), scene.get("segs_path"), scene.get("aggregation_path")]
    return all(path is not None and Path(path).exists() for path in paths)


def _box_source(scene: Mapping[str, Any]) -> AnnotatedBoxObjects | None:
    """The annotated-box source when an object of the scan has a box (on its mesh when the file exists)."""
    if not any(item.get("box") is not None for item in scene.get("objects") or []):
        return None
    mesh = scene.get("mesh_path")
    return AnnotatedBoxObjects(mesh if mesh is not None and Path(mesh).exists() else None)


def choose_object_source(
    scene: Mapping[str, Any], records: list[FrameRecord], preference: str
) -> ObjectSource:
    """Where object points come from: the preferred source when the scan has it, else none; ``auto``: the
    segmented mesh, then the instance masks, then the annotated boxes.

    >>> choose_object_source({"scene_id": "s"}, [], "auto").name
    'none'
    """
    has_mesh = _has_mesh_segmentation(scene)
    has_masks = any(record.instance_path is not None for record in records)
    boxes = _box_source(scene)
    if preference == "mesh":
        return MeshObjects() if has_mesh else NoObjects()
    if preference == "instance_masks":
        return InstanceMaskObjects() if has_masks else NoObjects()
    if preference == "annotated_boxes":
        return boxes or NoObjects()
    if has_mesh:
        return MeshObjects()
    if has_masks:
        return InstanceMaskObjects()
    return boxes or NoObjects()


def voxel_groups(points: np.ndarray, voxel_size: float) -> tuple[np.ndarray, np.ndarray]:
    """Each point's voxel (an index into the occupied voxels) and the occupied voxels' point centres.

    >>> group, centres = voxel_groups(np.array([[0.01, 0, 0], [0.03, 0, 0], [0.5, 0, 0]]), 0.1)
    >>> group.tolist(), centres[:, 0].round(3).tolist()
    ([0, 0, 1], [0.02, 0.5])
    """
    keys = np.floor(points / voxel_size).astype(np.int64)
    group = voxel_indices(keys - keys.min(axis=0))
    counts = np.bincount(group)
    centres = np.stack([np.bincount(group, weights=points[:, axis]) for axis in range(3)], axis=1)
    return group, centres / counts[:, None]


def _remove_cloud_outliers(points: np.ndarray, colors: np.ndarray | None, settings: SceneGeometrySettings):
    """The scene cloud without its statistical outliers, tested on ``cloud_outlier_voxel_m`` voxels."""
    if len(points) <= settings.cloud_outlier_neighbors:
        return points, colors
    if settings.cloud_outlier_voxel_m > 0:
        group, centres = voxel_groups(points, settings.cloud_outlier_voxel_m)
        inlier_voxels = np.zeros(len(centres), dtype=bool)
        inlier_voxels[
            statistical_inliers(centres, settings.cloud_outlier_neighbors, settings.cloud_outlier_std_ratio)
        ] = True
        kept = np.flatnonzero(inlier_voxels[group])
    else:
        kept = statistical_inliers(points, settings.cloud_outlier_neighbors, settings.cloud_outlier_std_ratio)
    return points[kept], (None if colors is None else colors[kept])


def _fallback_floor(points: np.ndarray, up: np.ndarray) -> FloorPlane:
    heights = points @ up
    return FloorPlane(normal=up, offset=-float(np.percentile(heights, 1.0)), inlier_count=0, inlier_rmse=0.0)


def _fuse_scan(
    scene_id: str,
    records: list[FrameRecord],
    source: ObjectSource,
    settings: SceneGeometrySettings,
    log: QuarantineLog,
    progress: bool,
) -> FusedScene:
    """Fuse the frames at the stride the first frame's depth size calls for; bad frames are logged."""
    stride = settings.stride_for(records[0].depth_size, source.reads_instance_masks, frames=len(records))
    fusion = settings.model_copy(update={"pixel_stride": stride})
    fused = fuse_frames(records, fusion, with_instances=source.reads_instance_masks, progress=progress)
    for record_id, source_file, reason in fused.failures:
        log.add(record_id, reason, source_file=source_file)
    if not fused.used_frames:
        reasons = sorted({reason.split(":", 1)[0] for _, _, reason in fused.failures})
        raise SceneBuildError(
            f"scene {scene_id} has no usable frame: all {len(records)} frames were quarantined ({'; '.join(reasons)})"
        )
    return fused


def level_floor(
    plane: FloorPlane, up: np.ndarray, points: np.ndarray, normals: np.ndarray | None, window_m: float
) -> FloorPlane:
    """The floor plane with its normal set to the data set's ``up`` and its height the median height (along
    ``up``) of the upward-facing points within ``window_m`` of the fitted plane's height there.

    >>> rng = np.random.default_rng(0)
    >>> floor = np.column_stack([rng.uniform(0, 4, (500, 2)), rng.normal(-1.3, 0.005, 500)])
    >>> tilted = FloorPlane(np.array([0.02, 0.0, 1.0]) / np.linalg.norm([0.02, 0.0, 1.0]), 1.3, 500, 0.0)
    >>> level = level_floor(tilted, np.array([0.0, 0.0, 1.0]), floor, None, 0.06)
    >>> level.normal.tolist(), bool(abs(level.offset - 1.3) < 0.003)
    ([0.0, 0.0, 1.0], True)
    """
    up = np.asarray(up, dtype=np.float64) / np.linalg.norm(up)
    candidates = np.asarray(points, dtype=np.float64)
    if normals is not None and len(normals) == len(candidates):
        with np.errstate(invalid="ignore"):
            candidates = candidates[np.nan_to_num(np.asarray(normals) @ up, nan=0.0) > 0.9]
    heights = candidates @ up
    near = np.abs(plane.height(candidates)) <= window_m
    if near.sum() < 3:
        return FloorPlane(up, plane.offset, plane.inlier_count, plane.inlier_rmse)
    floor_height = float(np.median(heights[near]))
    residual = heights[near] - floor_height
    return FloorPlane(up, -floor_height, int(near.sum()), float(np.sqrt(np.mean(residual**2))))


def _find_floor(
    scene_id: str,
    fused: FusedScene,
    records: list[FrameRecord],
    settings: SceneGeometrySettings,
    world_up: np.ndarray | None = None,
    axis_alignment: Sequence[float] | None = None,
) -> tuple[FloorPlane, str]:
    """The floor plane and how it was found: ``ransac``; or, when no plane qualifies, the lowest points along the
    scan's gravity: the data set's up axis (``world_up``: ARKitScenes, ScanNet++), else the scan's own
    (``axis_alignment``, ``camera_poses``: :func:`assets.dge.floor.scan_gravity`), else along the cameras' mean
    up, a guess (``fallback``: the questions that depend on "up" are withheld). A fitted plane is levelled on
    ``world_up`` when there is one (its height is still found)."""
    used_poses = [record.pose for record in records if record.frame_index in set(fused.used_frames)]
    gravity: np.ndarray | None
    if world_up is not None:
        gravity, gravity_source = world_up, GRAVITY_FROM_WORLD_UP
    else:
        alignment = (
            None if axis_alignment is None else np.asarray(axis_alignment, dtype=np.float64).reshape(4, 4)
        )
        gravity, gravity_source = scan_gravity(alignment, used_poses, settings)
    up = gravity if gravity is not None else up_prior_from_poses(used_poses)
    try:
        plane = fit_floor_plane(fused.points, fused.normals, up, settings)
        if world_up is not None:
            plane = level_floor(plane, world_up, fused.points, fused.normals, settings.floor_settle_window_m)
        return plane, "ransac"
    except FloorNotFoundError as error:
        if gravity is not None:
            logger.warning(
                "scene %s: %s; the floor is the lowest points along the %s", scene_id, error, gravity_source
            )
            return _fallback_floor(fused.points, gravity), gravity_source
        logger.warning(
            "scene %s: %s, and the scan gives no gravity direction; using the lowest points along the cameras' up "
            "direction, and no question that depends on 'up' is asked",
            scene_id,
            error,
        )
        return _fallback_floor(fused.points, up), "fallback"


def _measure_objects(
    context: ScanContext, source: ObjectSource, dropped: DroppedObjects
) -> list[ObjectGeometry]:
    """Clean and measure the source's objects; objects with no or too few points are dropped."""
    candidates = source.candidates(context, dropped)
    source_file = source.source_file(context.scene)
    objects: list[ObjectGeometry] = []
    for candidate in candidates:
        if len(candidate.points) == 0:
            dropped.drop(
                candidate.object_id,
                candidate.label,
                "no points: the object has no surface in the segmentation",
                source_file,
            )
            continue
        try:
            objects.append(
                measure_object(
                    candidate.object_id,
                    candidate.label,
                    candidate.points,
                    candidate.normals,
                    candidate.point_areas,
                    context.settings,
                    noisy=source.noisy_points,
                )
            )
        except ObjectRejectedError as error:
            dropped.drop(candidate.object_id, candidate.label, str(error), source_file)
    if source.reports_unseen_objects:
        candidate_ids = {candidate.object_id for candidate in candidates}
        for object_id, label in sorted(context.labels.items()):
            if object_id not in candidate_ids:
                dropped.drop(object_id, label, "no points: never seen in a usable frame", source_file)
    return objects


def raise_tops_to_masks(
    scene_id: str,
    objects: list[ObjectGeometry],
    top_rays: Mapping[int, list[np.ndarray]],
    world_to_gravity: np.ndarray,
    settings: SceneGeometrySettings,
) -> None:
    """Raise each instance-mask object's top to its masks' tops (:func:`assets.dge.objects.raise_top_to_masks`;
    ``top_rays`` in the world frame, as :class:`FusedScene` has them)."""
    for obj in objects:
        if obj.object_id not in top_rays:
            continue
        rays = np.asarray(top_rays[obj.object_id])  # (frames, 2, 3): origin, direction
        in_gravity = np.stack(
            [transform_points(world_to_gravity, rays[:, 0]), rotate_vectors(world_to_gravity, rays[:, 1])],
            axis=1,
        )
        raise_m = raise_top_to_masks(obj, list(in_gravity), settings)
        if raise_m > 0:
            logger.debug(
                "scene %s: object %d's top raised %.3f m to its masks' top", scene_id, obj.object_id, raise_m
            )


def camera_views(
    records: list[FrameRecord], used_frames: list[int], world_to_gravity: np.ndarray
) -> list[CameraView]:
    """The used frames' depth cameras in the gravity frame."""
    used = set(used_frames)
    return [
        CameraView(
            record.frame_index,
            world_to_gravity @ record.pose,
            record.depth_intrinsics,
            int(record.depth_size[0]),
            int(record.depth_size[1]),
        )
        for record in records
        if record.frame_index in used
    ]


def add_measurement_confidence(
    objects: list[ObjectGeometry],
    cloud: np.ndarray,
    views: list[CameraView],
    settings: SceneGeometrySettings,
    complete: bool = False,
    cut_off_frames: Mapping[int, Collection[int]] | None = None,
) -> None:
    """Fill in each object's measurement confidence (:mod:`assets.dge.confidence`) from the views' depth buffers of
    the cloud, voxel-downsampled to ``confidence_buffer_voxel_m``; ``complete``: the objects' points are whole
    objects (sampled on the segmented mesh); ``cut_off_frames``: per object, the frames whose instance mask of it
    touches the image border."""
    coarse, _, _ = voxel_downsample(cloud, settings.confidence_buffer_voxel_m)
    buffers = [
        DepthBuffer.build(view, coarse, settings.confidence_buffer_width, settings.confidence_buffer_voxel_m)
        for view in views
    ]
    for obj in objects:
        confidence = measurement_confidence(
            obj.points,
            obj.obb_center,
            obj.obb_extents,
            obj.obb_yaw,
            buffers,
            obj.point_spread_m,
            obj.object_id,
            settings,
            seed=settings.seed,
            boundary_blur_m=obj.boundary_blur_m,
            complete=complete,
            cut_off_frames=(cut_off_frames or {}).get(obj.object_id, ()),
            support_gap_m=0.0
            if complete
            else support_gap(obj.points, obj.obb_center, obj.obb_extents, obj.obb_yaw, cloud, settings),
        )
        obj.observed_views = confidence.observed_views
        obj.extent_coverage = confidence.extent_coverage
        obj.depth_noise_m = confidence.depth_noise_m
        obj.position_uncertainty_m = confidence.position_uncertainty_m
        obj.size_uncertainty_m = confidence.size_uncertainty_m
        obj.cut_off_views = confidence.cut_off_views
        obj.support_gap_m = confidence.support_gap_m


def build_scan_geometry(
    frames: pl.DataFrame,
    scene: Mapping[str, Any],
    config: SceneGeometrySettings = DEFAULT_SCENE_GEOMETRY_SETTINGS,
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
    records = [records[i] for i in keyframe_indices([record.pose for record in records], config)]
    source = choose_object_source(scene, records, config.object_points_source)
    fused = _fuse_scan(scene_id, records, source, config, log, progress)
    world_up = scene.get("world_up")
    floor, floor_source = _find_floor(
        scene_id,
        fused,
        records,
        config,
        None if world_up is None else np.asarray(world_up, dtype=np.float64),
        scene.get("axis_alignment"),
    )
    world_to_gravity = gravity_transform(floor)
    cloud = transform_points(world_to_gravity, fused.points)
    cloud, colors = _remove_cloud_outliers(cloud, fused.colors, config)
    room = measure_room(
        cloud, config.room_floor_threshold_m, config.room_trim_share, config.room_min_wall_cover
    )
    stored_points, _, stored_colors = voxel_downsample(cloud, config.stored_cloud_voxel_m, colors=colors)

    labels = {int(item["object_id"]): str(item["label"]) for item in (scene.get("objects") or [])}
    context = ScanContext(scene_id, scene, labels, fused, world_to_gravity, config, log)
    dropped = DroppedObjects(scene_id, log)
    objects = _measure_objects(context, source, dropped)
    if source.reads_instance_masks:
        raise_tops_to_masks(scene_id, objects, fused.top_rays, world_to_gravity, config)
    add_measurement_confidence(
        objects,
        stored_points,
        camera_views(records, fused.used_frames, world_to_gravity),
        config,
        complete=source.complete_objects,
        cut_off_frames=fused.cut_off_frames,
    )
    logger.info(
        "scene %s: %d frames used, %d quarantined, %d objects measured, %d dropped",
        scene_id,
        len(fused.used_frames),
        len(fused.failures),
        len(objects),
        len(dropped.rows),
    )
    return ScanGeometry(
        scene_id=scene_id,
        object_points_source=source.name,
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
        dropped_objects=dropped.rows,
    )


def camera_poses_in_gravity(geometry: ScanGeometry, records: list[FrameRecord]) -> dict[int, np.ndarray]:
    """Camera-to-gravity-frame poses of the frames ``geometry`` used, by frame index."""
    used = set(geometry.used_frames)
    return {
        record.frame_index: geometry.world_to_gravity @ record.pose
        for record in records
        if record.frame_index in used
    }
