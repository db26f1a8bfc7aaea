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

CONTRACT_VERSION = "1.0.0"

BOX_SOURCES = ["instance_mask", "points"]


def _vector(size: int) -> dy.List:
    return dy.List(dy.Float64(nullable=False), nullable=False, min_length=size, max_length=size)


class FrameVisibility(dy.Schema):
    """What one frame shows of one object."""

    scene_id = dy.String(primary_key=True, min_length=1)
    frame_index = dy.Int64(primary_key=True, min=0)
    object_id = dy.Int64(primary_key=True, min=0)
    label = dy.String(nullable=False)
    image_width = dy.Int64(nullable=False, min=1)
    image_height = dy.Int64(nullable=False, min=1)
    visibility_ratio = dy.Float64(nullable=False, min=0.0, max=1.0)
    in_frame_ratio = dy.Float64(nullable=False, min=0.0, max=1.0)
    visible_area_px = dy.Float64(nullable=False, min=0.0)
    truncated = dy.Bool(nullable=False)
    occluded = dy.Bool(nullable=False)
    bbox = grid_box_column(nullable=True)
    bbox_px = pixel_box_column(nullable=True)
    bbox_source = dy.String(nullable=True)
    centroid_depth_m = dy.Float64(nullable=False)
    centroid_distance_m = dy.Float64(nullable=False, min=0.0)
    centroid_px = _vector(2)
    camera_position = _vector(3)
    camera_pose = _vector(16)

    @dy.rule()
    def box_present_together(cls) -> pl.Expr:
        """The grid box, the pixel box and the box source are all present or all null."""
        return (cls.bbox.col.is_null() == cls.bbox_px.col.is_null()) & (
            cls.bbox.col.is_null() == cls.bbox_source.col.is_null()
        )

    @dy.rule()
    def known_box_source(cls) -> pl.Expr:
        """A box comes from the instance mask or from the projected points."""
        return cls.bbox_source.col.is_null() | cls.bbox_source.col.is_in(BOX_SOURCES)

    @dy.rule()
    def box_is_ordered(cls) -> pl.Expr:
        """A present grid box has x2 > x1 and y2 > y1."""
        return cls.bbox.col.is_null() | grid_box_is_valid(cls.bbox.col)
