"""Contract for ``rgbd_frames``: one row per RGB-D frame of a scan (ScanNet SensReader export layout).

Matrices are row-major: intrinsics 3x3 (9 numbers) for colour and depth, which differ in
resolution; the pose is the 4x4 camera-to-world transform (OpenCV camera: x right, y down, z
forward). Depth pixels divided by ``depth_scale`` give metres (ScanNet: 1000, millimetres).
"""

from __future__ import annotations

import dataframely as dy
import polars as pl

from data_contracts.origin import origin_column

CONTRACT_VERSION = "1.1.0"  # 1.1: origin


def _matrix(size: int, description: str) -> dy.List:
    return dy.List(
        dy.Float64(nullable=False),
        nullable=False,
        min_length=size,
        max_length=size,
        description=description,
    )


class RgbdFrames(dy.Schema):
    """A frame: colour and depth files, their intrinsics, and the camera pose."""

    scene_id = dy.String(
        primary_key=True,
        min_length=1,
        description="Scan id: the name of the scan's folder (rgbd_scenes.scene_id).",
    )
    frame_index = dy.Int64(
        primary_key=True,
        min=0,
        description="Frame number from the file names ('color/<i>.jpg', 'depth/<i>.png', 'pose/<i>.txt'), "
        "0-based as ScanNet numbers them; sorted numerically, and not necessarily contiguous (frames with a "
        "missing file or an invalid pose are quarantined).",
    )
    color_path = dy.String(nullable=False, description="Path of the colour image 'color/<i>.jpg' (or .png).")
    depth_path = dy.String(
        nullable=False,
        description="Path of the depth image 'depth/<i>.png': 16-bit, divide by depth_scale for metres; 0 means "
        "no reading.",
    )
    instance_path = dy.String(
        nullable=True,
        description="Path of the instance image 'instance-filt/<i>.png' (16-bit, objectId + 1 per pixel, 0 for no "
        "object, at colour resolution); null when the scan has no instance image for this frame.",
    )
    depth_scale = dy.Float64(
        nullable=False,
        min_exclusive=0.0,
        description="Depth image units per metre: a pixel value divided by it gives metres (ScanNet: 1000, "
        "millimetres).",
    )
    color_width = dy.Int64(nullable=False, min=1, description="Colour image width in pixels.")
    color_height = dy.Int64(nullable=False, min=1, description="Colour image height in pixels.")
    depth_width = dy.Int64(
        nullable=False,
        min=1,
        description="Depth image width in pixels (differs from the colour width in ScanNet).",
    )
    depth_height = dy.Int64(
        nullable=False,
        min=1,
        description="Depth image height in pixels (differs from the colour height in ScanNet).",
    )
    color_intrinsics = _matrix(
        9,
        "Colour camera intrinsics, 3x3 row-major [fx, 0, cx, 0, fy, cy, 0, 0, 1] in colour pixels: the top-left "
        "3x3 of 'intrinsic/intrinsic_color.txt', the same for every frame of the scan.",
    )
    depth_intrinsics = _matrix(
        9,
        "Depth camera intrinsics, 3x3 row-major [fx, 0, cx, 0, fy, cy, 0, 0, 1] in depth pixels: the top-left 3x3 "
        "of 'intrinsic/intrinsic_depth.txt', the same for every frame of the scan.",
    )
    pose = _matrix(
        16,
        "Camera-to-world transform of the frame, 4x4 row-major (16 numbers; translation in metres at indices 3, "
        "7, 11). OpenCV camera axes: x right, y down, z forward. The scan's world frame as stored (ScanNet: z up); "
        "invalid (-inf) or non-rigid poses are quarantined.",
    )
    source = dy.String(
        nullable=False,
        description="Reader that produced the row: always 'scannet' (ScanNet SensReader layout, the sample "
        "world's scans included).",
    )
    origin = origin_column("frames")

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
