"""Contract for ``rgbd_scenes``: one row per RGB-D scan (a ScanNet-style scene folder).

``objects`` lists the annotated instances from the aggregation file (``objectId`` is 0-based; the
instance images store ``objectId + 1`` with 0 meaning no object).
"""

from __future__ import annotations

import dataframely as dy
import polars as pl

CONTRACT_VERSION = "1.0.0"


class RgbdScenes(dy.Schema):
    """A scan: its folder, optional mesh and segmentation, annotated objects and frame count."""

    scene_id = dy.String(primary_key=True, min_length=1)
    scene_dir = dy.String(nullable=False)
    mesh_path = dy.String(nullable=True)
    segs_path = dy.String(nullable=True)
    aggregation_path = dy.String(nullable=True)
    objects = dy.List(
        dy.Struct(
            {"object_id": dy.Int64(nullable=False, min=0), "label": dy.String(nullable=False)}, nullable=False
        ),
        nullable=False,
    )
    num_frames = dy.Int64(nullable=False, min=1)
    source = dy.String(nullable=False)

    @dy.rule()
    def object_ids_unique(cls) -> pl.Expr:
        """Instance ids are unique within a scene."""
        ids = cls.objects.col.list.eval(pl.element().struct.field("object_id"))
        return ids.list.n_unique() == ids.list.len()
