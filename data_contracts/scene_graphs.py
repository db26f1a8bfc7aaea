"""Contract for ``scene_graphs``: one row per image with its objects (boxes, names, attributes) and relations.

Read from raw Visual Genome JSON, the VG150 layout, prompt-style Parquet, or the sample world. Boxes
are canonical (0..1000 grid, see :mod:`data_contracts.boxes`) with the pixel box beside them.

``split`` (1.1.0) is the image's split in its source: the VG150 h5 ``split`` array (0 train, 2 test;
the usual validation images are carved from train by the consumer), a prompt-style Parquet's
``split`` column or file name, ``train`` for raw Visual Genome (which has no split) unless configured.
Training questions must never come from ``test`` images; the ``scene_graphs`` source asset leaves
them out unless asked to keep them.

``origin`` (1.2.0) says whether the image is the sample world's or a real data set's.
"""

from __future__ import annotations

import dataframely as dy
import polars as pl

from data_contracts.columns import all_grid_boxes_valid, grid_box_column, image_column, pixel_box_column
from data_contracts.origin import origin_column

CONTRACT_VERSION = "1.2.0"
SPLITS = ["train", "val", "test"]

OBJECT_FIELDS = {
    "object_id": dy.String(nullable=False),
    "name": dy.String(nullable=False, min_length=1),
    "names": dy.List(dy.String(nullable=False), nullable=False),
    "attributes": dy.List(dy.String(nullable=False), nullable=False),
    "bbox": grid_box_column(),
    "bbox_px": pixel_box_column(),
}
RELATION_FIELDS: dict[str, dy.Column] = {
    "subject_id": dy.String(nullable=False),
    "predicate": dy.String(nullable=False, min_length=1),
    "object_id": dy.String(nullable=False),
}


class SceneGraphs(dy.Schema):
    """An image's scene graph."""

    image_id = dy.String(
        primary_key=True,
        min_length=1,
        description="Visual Genome image id as text (the 'image_id' of image_data.json or of the Parquet row).",
    )
    image = image_column(
        description="The image as a Hugging Face image cell {bytes, path}: the file's bytes unchanged and its file "
        "name (raw and VG150 layouts), or the cell of the prompt-style Parquet row."
    )
    image_width = dy.Int64(
        nullable=False,
        min=1,
        description="Image width in pixels: image_data.json's 'width' (raw, VG150; the file's when absent), the "
        "decoded image's for prompt-style Parquet. Boxes are relative to this size.",
    )
    image_height = dy.Int64(
        nullable=False,
        min=1,
        description="Image height in pixels: image_data.json's 'height' (raw, VG150; the file's when absent), the "
        "decoded image's for prompt-style Parquet. Boxes are relative to this size.",
    )
    objects = dy.List(
        dy.Struct(OBJECT_FIELDS, nullable=False),
        nullable=False,
        description="Annotated objects, in annotation order: object_id (raw VG: its numeric object_id as text; "
        "VG150: 'name.N' with N the box's 1-based position among the image's boxes; prompt-style: the file's "
        "'name.N' id), name (lower-case first name; prompt-style: the id "
        "without '.N'), names (every name, lower case; one name outside raw VG), attributes (lower case; from the "
        "h5 for VG150; always empty for prompt-style), bbox (canonical [x1, y1, x2, y2] on the 0..1000 grid, x "
        "right, y down, clipped to the image) and bbox_px (the same box in pixels of image_width x image_height, "
        "clipped to the image except for prompt-style rows, which keep the file's box). Objects with no area are "
        "quarantined.",
    )
    relationships = dy.List(
        dy.Struct(RELATION_FIELDS, nullable=False),
        nullable=False,
        description="Relations {subject_id, predicate, object_id} between objects of this image (ids are "
        "objects.object_id; raw VG ids merged through merged_object_ids point at the surviving object). "
        "Predicates are lower-cased for raw VG, VG150's dictionary names, prompt-style text as given. Relations "
        "to dropped or missing objects are quarantined.",
    )
    source = dy.String(
        nullable=False,
        description="Layout read: 'visual_genome' (raw v1.4 JSON, also the sample world), 'vg150' (the h5 "
        "split) or 'vg150_prompt' (prompt-style Parquet).",
    )
    origin = origin_column("scene graphs")
    split = dy.String(
        nullable=False,
        regex="^(?:" + "|".join(SPLITS) + ")$",
        description="The image's split in its source: 'train', 'val' or 'test' (VG150's h5 split array, a "
        "Parquet 'split' column or file name, 'train' for raw VG unless configured). The scene_graphs asset "
        "keeps train and val by default.",
    )

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
