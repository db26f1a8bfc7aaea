"""Contract for ``rgbd_frames``: one row per RGB-D frame of a scan (ScanNet, ARKitScenes or ScanNet++).

Every reader gives the same convention, so everything after this table is shared. Matrices are
row-major: intrinsics 3x3 (9 numbers) for colour and depth, which may differ in resolution; the pose
is the 4x4 camera-to-world transform (OpenCV camera: x right, y down, z forward). Depth pixels divided
by ``depth_scale`` give metres (1000 for all three: millimetres). Sizes, intrinsics and pose describe
the upright images: a frame stored rotated (ARKitScenes' ``sky_direction``) is turned upright by
``upright_turns`` clockwise quarter turns when it is read (:func:`data_contracts.images.upright`).
"""

from __future__ import annotations

import dataframely as dy
import polars as pl

from data_contracts.origin import origin_column
from data_contracts.scan_datasets import dataset_column

CONTRACT_VERSION = "1.2.0"  # 1.2: ARKitScenes and ScanNet++ (upright_turns); 1.1: origin


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
        description="Scan id (rgbd_scenes.scene_id), also the scan's `scenes` partition key.",
    )
    frame_index = dy.Int64(
        primary_key=True,
        min=0,
        description="Frame number, in capture order and not necessarily contiguous (quarantined frames leave "
        "gaps): ScanNet's file number ('color/<i>.jpg'), ScanNet++'s video frame ('frame_<i>.jpg'), "
        "ARKitScenes' timestamp in milliseconds ('<video>_<seconds>.png').",
    )
    color_path = dy.String(
        nullable=False, description="Path of the colour image as stored (ScanNet 'color/<i>.jpg' or .png)."
    )
    depth_path = dy.String(
        nullable=False,
        description="Path of the depth image as stored ('depth/<i>.png'): 16-bit, divide by depth_scale for "
        "metres; 0 means no reading.",
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
    color_width = dy.Int64(nullable=False, min=1, description="Upright colour image width in pixels.")
    color_height = dy.Int64(nullable=False, min=1, description="Upright colour image height in pixels.")
    depth_width = dy.Int64(
        nullable=False,
        min=1,
        description="Upright depth image width in pixels (differs from the colour width in ScanNet and ScanNet++).",
    )
    depth_height = dy.Int64(
        nullable=False,
        min=1,
        description="Upright depth image height in pixels (differs from the colour height in ScanNet and "
        "ScanNet++).",
    )
    upright_turns = dy.Int64(
        nullable=False,
        min=0,
        max=3,
        description="Clockwise quarter turns that make the stored colour and depth images upright: ARKitScenes' "
        "sky_direction Left 1, Down 2, Right 3, Up 0; always 0 for ScanNet and ScanNet++.",
    )
    color_intrinsics = _matrix(
        9,
        "Colour camera intrinsics of the upright image, 3x3 row-major [fx, 0, cx, 0, fy, cy, 0, 0, 1] in colour "
        "pixels (ScanNet: 'intrinsic/intrinsic_color.txt'; ARKitScenes: the frame's '.pincam'; ScanNet++: the "
        "frame's 'intrinsic' scaled to the colour image's size).",
    )
    depth_intrinsics = _matrix(
        9,
        "Depth camera intrinsics of the upright image, 3x3 row-major [fx, 0, cx, 0, fy, cy, 0, 0, 1] in depth "
        "pixels (ScanNet: 'intrinsic/intrinsic_depth.txt'; ARKitScenes: the colour intrinsics, same grid; "
        "ScanNet++: the colour intrinsics scaled to the depth image's size).",
    )
    pose = _matrix(
        16,
        "Camera-to-world transform of the upright camera, 4x4 row-major (16 numbers; translation in metres at "
        "indices 3, 7, 11). OpenCV camera axes: x right, y down, z forward. The scan's world frame as stored "
        "(ScanNet: the scan's; ARKitScenes: the gravity-aligned world of its mesh and boxes, the inverted "
        "world-to-camera '.traj' pose; ScanNet++: the aligned mesh's, 'aligned_pose'); invalid (-inf) or "
        "non-rigid poses are quarantined.",
    )
    source = dataset_column("the frame")
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
