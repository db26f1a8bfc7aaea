"""Contract for ``spatialcore_train``: OmniSpatial questions joined with their pseudo-GT boxes.

One row per question. The columns are the keyword arguments of the SpatialCORE reward functions:
the gold answer as a 0-based ``answer_index`` and its letter ``answer`` (never read back out of option
text), and ``pseudo_gt``, the task-relevant objects boxed on the 0..1000 grid with the detector's
confidence as ``validity`` (1.0 for human boxes). An empty ``pseudo_gt`` means no reference exists:
the spatial reward is then zero and generated boxes are neither rewarded nor penalised.

>>> from data_contracts.validation import polars_schema
>>> polars_schema(SpatialcoreTrain)["pseudo_gt"]
List(Struct({'bbox_2d': List(Int64), 'label': String, 'validity': Float64}))
"""

from __future__ import annotations

import dataframely as dy
import polars as pl

from data_contracts.columns import all_grid_boxes_valid, grid_box_column
from data_contracts.mcq_questions import McqQuestionsWithImage

CONTRACT_VERSION = "1.1.0"  # 1.1: image_sha256 (from mcq_questions 2.0)

PSEUDO_GT_FIELDS = {
    "bbox_2d": grid_box_column(),
    "label": dy.String(nullable=False, min_length=1),
    "validity": dy.Float64(nullable=False, min=0.0, max=1.0),
}
"""One pseudo-GT box: canonical grid box, object phrase, validity in [0, 1]."""


def pseudo_gt_column(description: str | None = None) -> dy.List:
    """A list of pseudo-GT boxes (possibly empty)."""
    return dy.List(dy.Struct(PSEUDO_GT_FIELDS, nullable=False), nullable=False, description=description)


def pseudo_gt_boxes_valid(items: pl.Expr) -> pl.Expr:
    """Expression: every pseudo-GT box of the list column ``items`` has x2 > x1 and y2 > y1."""
    return all_grid_boxes_valid(items, "bbox_2d")


class SpatialcoreTrain(McqQuestionsWithImage):
    """A SpatialCORE training question: every ``mcq_questions`` column and rule, its image embedded, and its
    pseudo-GT."""

    pseudo_gt = pseudo_gt_column(
        "The question's pseudo-GT from pseudo_gt_boxes, what the spatial reward compares generated boxes with: "
        "items {bbox_2d, label, validity}, bbox_2d the canonical [x1, y1, x2, y2] on the 0..1000 grid of the "
        "image (x right, y down), label the object phrase, validity in [0, 1] (Grounding DINO's score, 1.0 for "
        "human boxes). Empty when no reference exists (no phrase, no box, or no pseudo_gt_boxes row): the "
        "spatial reward is then zero. In spatialcore_train_corrupted some boxes are deliberately removed, "
        "relabelled or displaced."
    )

    @dy.rule()
    def pseudo_gt_boxes_are_ordered(cls) -> pl.Expr:
        """Every pseudo-GT box has x2 > x1 and y2 > y1."""
        return pseudo_gt_boxes_valid(cls.pseudo_gt.col)
