"""Contract for ``pseudo_gt_boxes``: the phrases of each question grounded as boxes with a validity.

One row per question, written in shards (static partitions) so several machines can build it at
once. ``pseudo_gt`` holds at most one box per phrase for Grounding DINO (its highest-scoring box at or
above ``box_threshold``; the score is the ``validity``), or the matching human boxes for the
``annotations`` backend (validity 1.0; a plural phrase such as "boxes" yields every instance).
``unmatched_phrases`` lists the phrases that got no box, ``num_candidates`` the detections seen before
the per-phrase maximum and the threshold.

>>> "pseudo_gt" in PseudoGtBoxes.columns()
True
"""

from __future__ import annotations

import dataframely as dy
import polars as pl

from data_contracts.spatialcore_train import pseudo_gt_boxes_valid, pseudo_gt_column

CONTRACT_VERSION = "1.0.0"
BACKENDS = ("grounding_dino", "annotations")


class PseudoGtBoxes(dy.Schema):
    """The pseudo-GT boxes of one question."""

    question_id = dy.String(primary_key=True, min_length=1)
    shard = dy.String(nullable=False)
    image_width = dy.Int64(nullable=False, min=1)
    image_height = dy.Int64(nullable=False, min=1)
    phrases = dy.List(dy.String(nullable=False, min_length=1), nullable=False)
    pseudo_gt = pseudo_gt_column()
    unmatched_phrases = dy.List(dy.String(nullable=False), nullable=False)
    num_candidates = dy.Int64(nullable=False, min=0)
    backend = dy.String(nullable=False)
    detector = dy.String(nullable=False)
    box_threshold = dy.Float64(nullable=False, min=0.0, max=1.0)
    text_threshold = dy.Float64(nullable=False, min=0.0, max=1.0)

    @dy.rule()
    def known_backend(cls) -> pl.Expr:
        """The backend is one of the grounding backends."""
        return cls.backend.col.is_in(list(BACKENDS))

    @dy.rule()
    def boxes_are_ordered(cls) -> pl.Expr:
        """Every box has x2 > x1 and y2 > y1."""
        return pseudo_gt_boxes_valid(cls.pseudo_gt.col)

    @dy.rule()
    def boxes_only_for_queries(cls) -> pl.Expr:
        """A question without phrases has no boxes."""
        return (cls.phrases.col.list.len() > 0) | (cls.pseudo_gt.col.list.len() == 0)

    @dy.rule()
    def detections_meet_the_box_threshold(cls) -> pl.Expr:
        """Every Grounding DINO box scores at least the box threshold."""
        lowest = cls.pseudo_gt.col.list.eval(pl.element().struct.field("validity")).list.min()
        return (cls.backend.col != "grounding_dino") | lowest.is_null() | (lowest >= cls.box_threshold.col)
