"""Contract for ``scene_graphs``: one row per image with its objects (boxes, names, attributes) and relations.

Read from raw Visual Genome JSON, the VG150 layout, prompt-style Parquet, or the sample world. Boxes
are canonical (0..1000 grid, see :mod:`data_contracts.boxes`) with the pixel box beside them.

``split`` (1.1.0) is the image's split in its source: the VG150 h5 ``split`` array (0 train, 2 test;
the usual validation images are carved from train by the consumer), a prompt-style Parquet's
``split`` column or file name, ``train`` for raw Visual Genome (which has no split) unless configured.
Training questions must never come from ``test`` images; the ``scene_graphs`` source asset leaves
them out unless asked to keep them.
"""

from __future__ import annotations

import dataframely as dy
import polars as pl

from data_contracts.columns import all_grid_boxes_valid, grid_box_column, image_column, pixel_box_column

CONTRACT_VERSION = "1.1.0"
SPLITS = ["train", "val", "test"]

OBJECT_FIELDS = {
    "object_id": dy.String(nullable=False),
    "name": dy.String(nullable=False, min_length=1),
    "names": dy.List(dy.String(nullable=False), nullable=False),
    "attributes": dy.List(dy.String(nullable=False), nullable=False),
    "bbox": grid_box_column(),
    "bbox_px": pixel_box_column(),
}
RELATION_FIELDS = {
    "subject_id": dy.String(nullable=False),
    "predicate": dy.String(nullable=False, min_length=1),
    "object_id": dy.String(nullable=False),
}


class SceneGraphs(dy.Schema):
    """An image's scene graph."""

    image_id = dy.String(primary_key=True, min_length=1)
    image = image_column()
    image_width = dy.Int64(nullable=False, min=1)
    image_height = dy.Int64(nullable=False, min=1)
    objects = dy.List(dy.Struct(OBJECT_FIELDS, nullable=False), nullable=False)
    relationships = dy.List(dy.Struct(RELATION_FIELDS, nullable=False), nullable=False)
    source = dy.String(nullable=False)
    split = dy.String(nullable=False, regex="^(?:" + "|".join(SPLITS) + ")$")

    @dy.rule()
    def object_boxes_are_ordered(cls) -> pl.Expr:
        """Every object's grid box has x2 > x1 and y2 > y1."""
        return all_grid_boxes_valid(cls.objects.col, "bbox")

    @dy.rule()
    def relations_reference_objects(cls) -> pl.Expr:
        """Every relation's subject and object are objects of the same image."""
        object_ids = cls.objects.col.list.eval(pl.element().struct.field("object_id"))
        subjects = cls.relationships.col.list.eval(pl.element().struct.field("subject_id"))
        objects = cls.relationships.col.list.eval(pl.element().struct.field("object_id"))
        return (subjects.list.set_difference(object_ids).list.len() == 0) & (
            objects.list.set_difference(object_ids).list.len() == 0
        )
