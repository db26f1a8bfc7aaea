"""Contracts of the pseudo-GT audit: ``pseudo_gt_audit`` (the boxes exported for review) and
``pseudo_gt_audit_precision`` (precision per confidence bin from the reviewer's verdicts).

SpatialCORE's appendix A.3 audits the boxes of 200 random training samples and reports precision per
Grounding DINO confidence range with 95% intervals (its Figure 6).

>>> sorted(PseudoGtAudit.primary_key()), sorted(PseudoGtAuditPrecision.primary_key())
(['audit_id'], ['confidence_bin'])
"""

from __future__ import annotations

import dataframely as dy
import polars as pl

from data_contracts.columns import grid_box_column, grid_box_is_valid, image_column

CONTRACT_VERSION = "1.0.0"


class PseudoGtAudit(dy.Schema):
    """One exported box: its sample, phrase, box, validity and confidence bin, with the image."""

    audit_id = dy.String(
        primary_key=True,
        min_length=1,
        description="'<question_id>#<box_index>': the key of the row in verdicts.csv and of its review picture.",
    )
    question_id = dy.String(
        nullable=False,
        description="The sampled spatialcore_train question (random draw of questions with pseudo-GT, seeded; "
        "200 by default).",
    )
    box_index = dy.Int64(
        nullable=False, min=0, description="0-based position of the box in the question's pseudo_gt list."
    )
    label = dy.String(
        nullable=False, min_length=1, description="The box's label: the object phrase it grounds."
    )
    bbox_2d = grid_box_column(
        description="The box as stored: canonical [x1, y1, x2, y2] on the 0..1000 grid of the image (x right, y "
        "down)."
    )
    validity = dy.Float64(
        nullable=False,
        min=0.0,
        max=1.0,
        description="The box's validity: Grounding DINO's confidence, 1.0 for human boxes.",
    )
    confidence_bin = dy.String(
        nullable=False,
        description="Validity range of the box, '<low>-<high>' from the bin edges (default 0.30, 0.50, 0.70, "
        "0.90, 1.00; half-open, the last bin includes 1.00), or '<0.30' below the first edge.",
    )
    task_type = dy.String(nullable=False, description="mcq_questions.task_type of the question.")
    question = dy.String(nullable=False, description="The question text, for the reviewer.")
    image = image_column(
        description="The question's image cell {bytes, path}, the box is drawn on it for review."
    )

    @dy.rule()
    def box_is_ordered(cls) -> pl.Expr:
        """The box has x2 > x1 and y2 > y1."""
        return grid_box_is_valid(cls.bbox_2d.col)


class PseudoGtAuditPrecision(dy.Schema):
    """Precision of one confidence bin (or of all boxes, bin ``"all"``) with its 95% Wilson interval."""

    confidence_bin = dy.String(
        primary_key=True,
        min_length=1,
        description="The validity range '<low>-<high>' (or '<first edge' below the bins), or 'all' for every "
        "reviewed box; one row per configured bin (plus the bin below the first edge when a reviewed box falls "
        "there), then 'all'.",
    )
    bin_low = dy.Float64(
        nullable=False,
        description="Lower edge of the bin (inclusive); 0.0 for the bin below the first edge; the first edge for "
        "'all' (which still counts boxes below it).",
    )
    bin_high = dy.Float64(
        nullable=False,
        description="Upper edge of the bin (exclusive, except 1.00 in the last bin); the last edge for 'all'.",
    )
    audited = dy.Int64(
        nullable=False,
        min=0,
        description="Boxes of the bin that have a reviewer's verdict (unreviewed boxes are not counted).",
    )
    correct = dy.Int64(
        nullable=False,
        min=0,
        description="Reviewed boxes of the bin judged correct (the box localises the intended object).",
    )
    precision = dy.Float64(
        nullable=True,
        min=0.0,
        max=1.0,
        description="correct / audited, rounded to 4 places; null when no box of the bin was reviewed.",
    )
    ci_low = dy.Float64(
        nullable=False,
        min=0.0,
        max=1.0,
        description="Lower end of the 95% Wilson score interval of the precision (0.0 when nothing was reviewed).",
    )
    ci_high = dy.Float64(
        nullable=False,
        min=0.0,
        max=1.0,
        description="Upper end of the 95% Wilson score interval of the precision (1.0 when nothing was "
        "reviewed).",
    )

    @dy.rule()
    def correct_within_audited(cls) -> pl.Expr:
        """No more correct boxes than audited ones; precision only where something was audited."""
        return (cls.correct.col <= cls.audited.col) & ((cls.audited.col > 0) | cls.precision.col.is_null())
