"""Contract for ``frame_visibility``: one row per (scene, frame, object) whose camera-facing part lies in the frame.

``visibility_ratio`` is the visible share of what the image would show of the object if nothing
else were in the way (the instance mask's pixels over the object's unoccluded pixels; 0 when it is
entirely hidden); ``in_frame_ratio`` is the share of its camera-facing silhouette inside the image
(``1 - truncation``). The 2D box is canonical (0..1000 grid, :mod:`data_contracts.boxes`) with the
pixel box (pixel edges: columns ``x1 .. x2 - 1``) beside it, both null when nothing is visible.
Camera position and pose are in the scene's gravity-aligned frame (see ``scene_geometry``).
"""

from __future__ import annotations

import dataframely as dy
import polars as pl

from data_contracts.columns import grid_box_column, grid_box_is_valid, pixel_box_column

CONTRACT_VERSION = "1.1.0"  # 1.1: boxes from rays cast against the segmented mesh

BOX_SOURCES = ["instance_mask", "mesh_rays", "points"]


def _vector(size: int, description: str) -> dy.List:
    return dy.List(
        dy.Float64(nullable=False),
        nullable=False,
        min_length=size,
        max_length=size,
        description=description,
    )


class FrameVisibility(dy.Schema):
    """What one frame shows of one object."""

    scene_id = dy.String(
        primary_key=True, min_length=1, description="Scan id (rgbd_scenes.scene_id), the partition key."
    )
    frame_index = dy.Int64(
        primary_key=True,
        min=0,
        description="rgbd_frames.frame_index of the frame (one of scene_geometry.used_frames).",
    )
    object_id = dy.Int64(
        primary_key=True,
        min=0,
        description="The measured object's id in scene_geometry.objects (the aggregation's 0-based objectId).",
    )
    label = dy.String(nullable=False, description="The object's label (scene_geometry.objects.label).")
    image_width = dy.Int64(
        nullable=False, min=1, description="Width of the frame's colour image in pixels (the boxes' image)."
    )
    image_height = dy.Int64(
        nullable=False, min=1, description="Height of the frame's colour image in pixels (the boxes' image)."
    )
    visibility_ratio = dy.Float64(
        nullable=False,
        min=0.0,
        max=1.0,
        description="Visible share of what the frame would show of the object with nothing else in the way: "
        "projected area of its camera-facing points that pass the depth-buffer test, over that area plus the "
        "area hidden by other surfaces (pixels without a depth reading count in neither); 0 when entirely "
        "hidden.",
    )
    in_frame_ratio = dy.Float64(
        nullable=False,
        min=0.0,
        max=1.0,
        description="Share of the object's camera-facing silhouette (projected area) that falls inside the "
        "image: 1 - truncation.",
    )
    visible_area_px = dy.Float64(
        nullable=False,
        min=0.0,
        description="Visible projected area of the object, in colour-image pixels (each visible point weighted "
        "by the image area it covers).",
    )
    truncated = dy.Bool(
        nullable=False,
        description="True when in_frame_ratio < truncated_below (default 0.995): part of the object lies outside "
        "the image.",
    )
    occluded = dy.Bool(
        nullable=False,
        description="True when visibility_ratio < occluded_below (default 0.95): something else hides part of "
        "the object.",
    )
    bbox = grid_box_column(
        nullable=True,
        description="2D box on the 0..1000 grid of the colour image, canonical [x1, y1, x2, y2] (x right, y "
        "down), from bbox_px; null when no box could be drawn (no instance-mask pixel and no visible point).",
    )
    bbox_px = pixel_box_column(
        nullable=True,
        description="The same box in colour-image pixels, pixel edges [x1, y1, x2, y2] (it covers columns x1 .. "
        "x2 - 1 and rows y1 .. y2 - 1); null together with bbox.",
    )
    bbox_source = dy.String(
        nullable=True,
        description="Where the box comes from: 'instance_mask' (the object's pixels in the frame's instance "
        "image), 'mesh_rays' (the pixels whose ray first hits one of the object's mesh segments) or 'points' "
        "(the visible projected points, each widened by its footprint); null together with bbox.",
    )
    centroid_depth_m = dy.Float64(
        nullable=False,
        description="Depth (camera z, along the optical axis) of the object's centroid in this frame, metres; "
        "negative when the centroid is behind the camera.",
    )
    centroid_distance_m = dy.Float64(
        nullable=False,
        min=0.0,
        description="Euclidean distance from the camera centre to the object's centroid, metres.",
    )
    centroid_px = _vector(
        2,
        "The centroid projected through the colour intrinsics, [u, v] in colour-image pixels (may lie outside "
        "the image).",
    )
    camera_position = _vector(
        3,
        "Camera centre [x, y, z] in the scene's gravity-aligned frame (scene_geometry: z up, floor at z = 0), "
        "metres.",
    )
    camera_pose = _vector(
        16,
        "Camera-to-gravity-frame transform, 4x4 row-major (world_to_gravity @ rgbd_frames.pose); OpenCV camera "
        "axes (x right, y down, z forward), translation in metres.",
    )

    @dy.rule()
    def box_present_together(cls) -> pl.Expr:
        """The grid box, the pixel box and the box source are all present or all null."""
        return (cls.bbox.col.is_null() == cls.bbox_px.col.is_null()) & (
            cls.bbox.col.is_null() == cls.bbox_source.col.is_null()
        )

    @dy.rule()
    def known_box_source(cls) -> pl.Expr:
        """A box comes from the instance mask, the mesh rays or the projected points."""
        return cls.bbox_source.col.is_null() | cls.bbox_source.col.is_in(BOX_SOURCES)

    @dy.rule()
    def box_is_ordered(cls) -> pl.Expr:
        """A present grid box has x2 > x1 and y2 > y1."""
        return cls.bbox.col.is_null() | grid_box_is_valid(cls.bbox.col)
