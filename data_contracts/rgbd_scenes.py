"""Contract for ``rgbd_scenes``: one row per RGB-D scan (a ScanNet-style scene folder).

``objects`` lists the annotated instances from the aggregation file (``objectId`` is 0-based; the
instance images store ``objectId + 1`` with 0 meaning no object).
"""

from __future__ import annotations

import dataframely as dy
import polars as pl

from data_contracts.origin import origin_column

CONTRACT_VERSION = "1.2.0"  # 1.1: origin; 1.2: axis_alignment


class RgbdScenes(dy.Schema):
    """A scan: its folder, optional mesh and segmentation, annotated objects and frame count."""

    scene_id = dy.String(
        primary_key=True,
        min_length=1,
        description="Scan id: the name of the scan's folder (e.g. 'scene0000_00').",
    )
    scene_dir = dy.String(nullable=False, description="Path of the scan's folder as it was read.")
    mesh_path = dy.String(
        nullable=True,
        description="Path of '<scene>_vh_clean_2.ply', the reconstructed mesh; null when the scan has none.",
    )
    segs_path = dy.String(
        nullable=True,
        description="Path of '<scene>_vh_clean_2.0.010000.segs.json' (segment index per mesh vertex); null when "
        "the scan has none.",
    )
    aggregation_path = dy.String(
        nullable=True,
        description="Path of '<scene>.aggregation.json' (segments grouped into labelled objects); null when the "
        "scan has none, and objects is then empty.",
    )
    objects = dy.List(
        dy.Struct(
            {"object_id": dy.Int64(nullable=False, min=0), "label": dy.String(nullable=False)}, nullable=False
        ),
        nullable=False,
        description="Annotated instances of the aggregation file's segGroups, in file order: object_id (its "
        "0-based 'objectId'; instance images store objectId + 1, 0 meaning no object) and label (its 'label' "
        "text, empty when missing). Empty without an aggregation file.",
    )
    num_frames = dy.Int64(
        nullable=False,
        min=1,
        description="Frames of the scan kept in rgbd_frames (frames with a missing file, an invalid pose or a "
        "differing image size are quarantined and not counted).",
    )
    source = dy.String(
        nullable=False,
        description="Reader that produced the row: always 'scannet' (ScanNet SensReader layout, the sample "
        "world's scans included).",
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
    origin = origin_column("scans")

    @dy.rule()
    def object_ids_unique(cls) -> pl.Expr:
        """Instance ids are unique within a scene."""
        ids = cls.objects.col.list.eval(pl.element().struct.field("object_id"))
        return ids.list.n_unique() == ids.list.len()
