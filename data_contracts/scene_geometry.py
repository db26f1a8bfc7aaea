"""Contract for ``scene_geometry``: one row per scanned scene, the DGE's cached 3D geometry.

Everything is in the scene's gravity-aligned frame (metres, ``z`` up along the floor normal, the
floor at ``z = 0``); ``world_to_gravity`` maps the scan's world frame into it. The row holds the
floor plane, the room's size, a downsampled copy of the fused cloud, and per object its cleaned
points (flattened ``x, y, z`` triples with normals and the surface area each point stands for),
axis-aligned and yaw-oriented boxes, centroid (the oriented box's centre), size (its largest
extent) and point count. Objects that could not be measured are listed with the reason.
"""

from __future__ import annotations

import dataframely as dy
import polars as pl

CONTRACT_VERSION = "1.0.0"

GEOMETRY_SOURCES = ["scanned", "estimated"]
OBJECT_POINT_SOURCES = ["mesh", "instance_masks", "none"]
FLOOR_SOURCES = ["ransac", "fallback"]


def _vector(size: int) -> dy.List:
    return dy.List(dy.Float64(nullable=False), nullable=False, min_length=size, max_length=size)


def _flat_floats() -> dy.List:
    return dy.List(dy.Float32(nullable=False), nullable=False)


OBJECT_FIELDS = {
    "object_id": dy.Int64(nullable=False, min=0),
    "label": dy.String(nullable=False),
    "point_count": dy.Int64(nullable=False, min=1),
    "centroid": _vector(3),
    "aabb_min": _vector(3),
    "aabb_max": _vector(3),
    "obb_center": _vector(3),
    "obb_extents": _vector(3),
    "obb_yaw": dy.Float64(nullable=False),
    "size_m": dy.Float64(nullable=False, min=0.0),
    "points": _flat_floats(),
    "normals": _flat_floats(),
    "point_areas": _flat_floats(),
}

DROPPED_OBJECT_FIELDS = {
    "object_id": dy.Int64(nullable=False, min=0),
    "label": dy.String(nullable=False),
    "reason": dy.String(nullable=False, min_length=1),
}


class SceneGeometry(dy.Schema):
    """A scanned scene's fused geometry, floor, room and measured objects."""

    scene_id = dy.String(primary_key=True, min_length=1)
    geometry_source = dy.String(nullable=False)
    object_points_source = dy.String(nullable=False)
    world_to_gravity = _vector(16)
    floor_source = dy.String(nullable=False)
    floor_normal = _vector(3)
    floor_offset = dy.Float64(nullable=False)
    floor_tilt_deg = dy.Float64(nullable=False, min=0.0, max=180.0)
    floor_inliers = dy.Int64(nullable=False, min=0)
    floor_rmse_m = dy.Float64(nullable=False, min=0.0)
    room_length_m = dy.Float64(nullable=False, min=0.0)
    room_width_m = dy.Float64(nullable=False, min=0.0)
    room_height_m = dy.Float64(nullable=False, min=0.0)
    room_area_m2 = dy.Float64(nullable=False, min=0.0)
    floor_area_m2 = dy.Float64(nullable=False, min=0.0)
    room_footprint = _flat_floats()
    cloud_voxel_size_m = dy.Float64(nullable=False, min_exclusive=0.0)
    num_cloud_points = dy.Int64(nullable=False, min=0)
    cloud_points = _flat_floats()
    cloud_colors = dy.List(dy.UInt8(nullable=False), nullable=True)
    used_frames = dy.List(dy.Int64(nullable=False), nullable=False, min_length=1)
    num_quarantined_frames = dy.Int64(nullable=False, min=0)
    num_objects = dy.Int64(nullable=False, min=0)
    objects = dy.List(dy.Struct(OBJECT_FIELDS, nullable=False), nullable=False)
    dropped_objects = dy.List(dy.Struct(DROPPED_OBJECT_FIELDS, nullable=False), nullable=False)

    @dy.rule()
    def known_sources(cls) -> pl.Expr:
        """Geometry, object-point and floor sources take their documented values."""
        return (
            cls.geometry_source.col.is_in(GEOMETRY_SOURCES)
            & cls.object_points_source.col.is_in(OBJECT_POINT_SOURCES)
            & cls.floor_source.col.is_in(FLOOR_SOURCES)
        )

    @dy.rule()
    def cloud_is_triples(cls) -> pl.Expr:
        """The flattened cloud holds ``num_cloud_points`` xyz triples (and colours, when present, as many)."""
        points_ok = cls.cloud_points.col.list.len() == 3 * cls.num_cloud_points.col
        colors_ok = cls.cloud_colors.col.is_null() | (
            cls.cloud_colors.col.list.len() == cls.cloud_points.col.list.len()
        )
        return points_ok & colors_ok

    @dy.rule()
    def object_count_matches(cls) -> pl.Expr:
        """``num_objects`` is the length of ``objects``."""
        return cls.objects.col.list.len() == cls.num_objects.col

    @dy.rule()
    def object_points_are_triples(cls) -> pl.Expr:
        """Every object's points and normals are xyz triples, with one area per point."""
        points = cls.objects.col.list.eval(pl.element().struct.field("points").list.len())
        normals = cls.objects.col.list.eval(pl.element().struct.field("normals").list.len())
        areas = cls.objects.col.list.eval(pl.element().struct.field("point_areas").list.len())
        return (
            ((points - normals).list.eval(pl.element().abs()).list.sum() == 0)
            & ((points - 3 * areas).list.eval(pl.element().abs()).list.sum() == 0)
            & (points.list.eval(pl.element() % 3).list.sum() == 0)
        )

    @dy.rule()
    def boxes_are_ordered(cls) -> pl.Expr:
        """Every object's axis-aligned box has ``aabb_min <= aabb_max`` on every axis."""
        low = pl.element().struct.field("aabb_min")
        high = pl.element().struct.field("aabb_max")
        gaps = cls.objects.col.list.eval(
            pl.min_horizontal(*(high.list.get(axis) - low.list.get(axis) for axis in range(3)))
        )
        return gaps.list.min().fill_null(0.0) >= 0.0

    @dy.rule()
    def object_ids_unique(cls) -> pl.Expr:
        """Object ids are unique within the scene, and a dropped object is not also measured."""
        measured = cls.objects.col.list.eval(pl.element().struct.field("object_id"))
        dropped = cls.dropped_objects.col.list.eval(pl.element().struct.field("object_id"))
        return (measured.list.n_unique() == measured.list.len()) & (
            measured.list.set_intersection(dropped).list.len() == 0
        )
