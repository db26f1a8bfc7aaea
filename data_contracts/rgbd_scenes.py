"""Contract for ``rgbd_scenes``: one row per RGB-D scan (ScanNet, ARKitScenes or ScanNet++).

``objects`` lists the annotated instances: ScanNet's aggregation file (``objectId`` 0-based; the
instance images store ``objectId + 1`` with 0 meaning no object), ScanNet++'s ``segments_anno.json``
(``objectId`` as annotated) or ARKitScenes' oriented boxes (their position in the annotation's ``data``).
An object's ``box`` is its annotated oriented box where the data set gives one.
"""

from __future__ import annotations

import dataframely as dy
import polars as pl

from data_contracts.origin import origin_column
from data_contracts.scan_datasets import dataset_column

CONTRACT_VERSION = (
    "1.3.0"  # 1.3: axis_alignment; 1.2: ARKitScenes and ScanNet++ (object boxes, world_up); 1.1: origin
)


def _floats(size: int, description: str) -> dy.List:
    return dy.List(
        dy.Float64(nullable=False), nullable=False, min_length=size, max_length=size, description=description
    )


BOX_FIELDS: dict[str, dy.Column] = {
    "centroid": _floats(3, "Box centre in the scan's world frame, metres."),
    "axes": _floats(9, "The box's three unit axes as the rows of a 3x3 row-major matrix (world frame)."),
    "lengths": _floats(3, "Full length of the box along each axis (row of axes), metres."),
}
"""An annotated oriented box (ARKitScenes' and ScanNet++'s ``obb``: centroid, normalizedAxes, axesLengths)."""


class RgbdScenes(dy.Schema):
    """A scan: its folder, optional mesh and segmentation, annotated objects and frame count."""

    scene_id = dy.String(
        primary_key=True,
        min_length=1,
        description="Scan id and `scenes` partition key: ScanNet's folder name ('scene0000_00'), "
        "'arkitscenes_<video_id>', 'scannetpp_<scene_id>'.",
    )
    scene_dir = dy.String(nullable=False, description="Path of the scan's folder as it was read.")
    mesh_path = dy.String(
        nullable=True,
        description="Path of the reconstructed mesh (ScanNet '<scene>_vh_clean_2.ply', ARKitScenes "
        "'<video>_3dod_mesh.ply', ScanNet++ 'scans/mesh_aligned_0.05.ply'); null when the scan has none.",
    )
    segs_path = dy.String(
        nullable=True,
        description="Path of the segment index per mesh vertex (ScanNet '<scene>_vh_clean_2.0.010000.segs.json', "
        "ScanNet++ 'scans/segments.json'); null when the scan has none (ARKitScenes).",
    )
    aggregation_path = dy.String(
        nullable=True,
        description="Path of the object annotation: segments grouped into labelled objects (ScanNet "
        "'<scene>.aggregation.json', ScanNet++ 'scans/segments_anno.json') or oriented boxes (ARKitScenes "
        "'<video>_3dod_annotation.json'); null when a ScanNet scan has none, and objects is then empty.",
    )
    objects = dy.List(
        dy.Struct(
            {
                "object_id": dy.Int64(nullable=False, min=0),
                "label": dy.String(nullable=False),
                "box": dy.Struct(BOX_FIELDS, nullable=True),
            },
            nullable=False,
        ),
        nullable=False,
        description="Annotated instances in file order: object_id (ScanNet: the 0-based 'objectId', instance "
        "images store objectId + 1, 0 meaning no object; ScanNet++: 'objectId'; ARKitScenes: the position in "
        "'data'), label (the raw 'label' text, empty when missing) and box (the annotated oriented box, null "
        "where the data set gives none: ScanNet). Empty without an annotation file.",
    )
    num_frames = dy.Int64(
        nullable=False,
        min=1,
        description="Frames of the scan kept in rgbd_frames (frames with a missing file, an invalid or "
        "unmatched pose or a differing image size are quarantined and not counted).",
    )
    world_up = dy.List(
        dy.Float64(nullable=False),
        nullable=True,
        min_length=3,
        max_length=3,
        description="The up direction the data set defines in the scan's world frame (unit vector; "
        "ARKitScenes and ScanNet++: [0, 0, 1], their worlds are gravity-aligned with z up); the floor's normal "
        "is then this axis, not a fitted one. Null where the data set does not say (ScanNet's raw poses).",
    )
    axis_alignment = dy.List(
        dy.Float64(nullable=False),
        nullable=True,
        min_length=16,
        max_length=16,
        description="4x4 row-major 'axisAlignment' of the scan's '<scene>.txt' meta file: the rigid transform that "
        "turns the scan's world frame (rgbd_frames.pose) z-up and axis-aligned, so its third row's rotation part "
        "is the gravity 'up' direction in the world frame; null when the scan has none.",
    )
    source = dataset_column("the scan")
    origin = origin_column("scans")

    @dy.rule()
    def object_ids_unique(cls) -> pl.Expr:
        """Instance ids are unique within a scene."""
        ids = cls.objects.col.list.eval(pl.element().struct.field("object_id"))
        return ids.list.n_unique() == ids.list.len()
