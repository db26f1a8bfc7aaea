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

    question_id = dy.String(
        primary_key=True,
        min_length=1,
        description="The question's mcq_questions.question_id (one row per object_phrases row of the shard).",
    )
    shard = dy.String(
        nullable=False,
        description="Partition key 'shard-00' .. 'shard-07': SHA-256 of question_id modulo 8, so a question "
        "always lands in the same shard.",
    )
    image_width = dy.Int64(
        nullable=False,
        min=1,
        description="Width in pixels of the question's image (mcq_questions.image_width).",
    )
    image_height = dy.Int64(
        nullable=False,
        min=1,
        description="Height in pixels of the question's image (mcq_questions.image_height).",
    )
    phrases = dy.List(
        dy.String(nullable=False, min_length=1),
        nullable=False,
        description="The text queries grounded: object_phrases.phrases of the question (empty: nothing queried, "
        "no box).",
    )
    pseudo_gt = pseudo_gt_column(
        "Grounded boxes {bbox_2d, label, validity}, in phrase order. bbox_2d: canonical [x1, y1, x2, y2] on the "
        "0..1000 grid (x right, y down). grounding_dino: at most one box per phrase, its highest-scoring "
        "detection, label the phrase, validity the detection score (>= box_threshold). annotations: the matched "
        "human boxes, validity 1.0, label the phrase in the singular; a plural phrase yields every instance."
    )
    unmatched_phrases = dy.List(
        dy.String(nullable=False),
        nullable=False,
        description="One entry per phrase that got no box, written '<phrase>: <reason>' (e.g. 'lamp: no "
        "detection at or above 0.3', 'cup: ambiguous ...'); not bare phrases.",
    )
    num_candidates = dy.Int64(
        nullable=False,
        min=0,
        description="grounding_dino: detections scoring at least box_threshold and tied to a phrase (above "
        "text_threshold), counted before keeping the best per phrase. annotations: annotated instances of the "
        "image in the COCO file. 0 for a question without phrases.",
    )
    backend = dy.String(
        nullable=False,
        description="Grounding backend: 'grounding_dino' (zero-shot detector) or 'annotations'.",
    )
    detector = dy.String(
        nullable=False,
        description="What produced the boxes: the Grounding DINO checkpoint (model id or folder), or "
        "'coco:<instances file>' for the annotations backend.",
    )
    box_threshold = dy.Float64(
        nullable=False,
        min=0.0,
        max=1.0,
        description="Least detection score kept (run setting, default 0.3 as in the paper); recorded for the "
        "annotations backend too, where it does not apply.",
    )
    text_threshold = dy.Float64(
        nullable=False,
        min=0.0,
        max=1.0,
        description="Least token probability that ties a detection to a phrase (run setting, default 0.25); "
        "recorded for the annotations backend too, where it does not apply.",
    )

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
