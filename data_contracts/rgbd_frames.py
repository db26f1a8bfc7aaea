"""Contract for ``rgbd_frames``: one row per RGB-D frame of a scan (ScanNet SensReader export layout).

Matrices are row-major: intrinsics 3x3 (9 numbers) for colour and depth, which differ in
resolution; the pose is the 4x4 camera-to-world transform (OpenCV camera: x right, y down, z
forward). Depth pixels divided by ``depth_scale`` give metres (ScanNet: 1000, millimetres).
"""

from __future__ import annotations

import dataframely as dy
import polars as pl

CONTRACT_VERSION = "1.0.0"


def _matrix(size: int) -> dy.List:
    return dy.List(dy.Float64(nullable=False), nullable=False, min_length=size, max_length=size)


class RgbdFrames(dy.Schema):
    """A frame: colour and depth files, their intrinsics, and the camera pose."""

    scene_id = dy.String(primary_key=True, min_length=1)
    frame_index = dy.Int64(primary_key=True, min=0)
    color_path = dy.String(nullable=False)
    depth_path = dy.String(nullable=False)
    instance_path = dy.String(nullable=True)
    depth_scale = dy.Float64(nullable=False, min_exclusive=0.0)
    color_width = dy.Int64(nullable=False, min=1)
    color_height = dy.Int64(nullable=False, min=1)
    depth_width = dy.Int64(nullable=False, min=1)
    depth_height = dy.Int64(nullable=False, min=1)
    color_intrinsics = _matrix(9)
    depth_intrinsics = _matrix(9)
    pose = _matrix(16)
    source = dy.String(nullable=False)

    @dy.rule()
    def focal_lengths_positive(cls) -> pl.Expr:
        """fx and fy of both intrinsics are positive."""
        return (
            (cls.color_intrinsics.col.list.get(0) > 0)
            & (cls.color_intrinsics.col.list.get(4) > 0)
            & (cls.depth_intrinsics.col.list.get(0) > 0)
            & (cls.depth_intrinsics.col.list.get(4) > 0)
        )

    @dy.rule()
    def pose_bottom_row_is_homogeneous(cls) -> pl.Expr:
        """The pose's last row is [0, 0, 0, 1] (rigidity itself is checked by the reader)."""
        pose = cls.pose.col
        return (
            (pose.list.get(12).abs() < 1e-6)
            & (pose.list.get(13).abs() < 1e-6)
            & (pose.list.get(14).abs() < 1e-6)
            & ((pose.list.get(15) - 1).abs() < 1e-6)
        )
