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

    audit_id = dy.String(primary_key=True, min_length=1)
    question_id = dy.String(nullable=False)
    box_index = dy.Int64(nullable=False, min=0)
    label = dy.String(nullable=False, min_length=1)
    bbox_2d = grid_box_column()
    validity = dy.Float64(nullable=False, min=0.0, max=1.0)
    confidence_bin = dy.String(nullable=False)
    task_type = dy.String(nullable=False)
    question = dy.String(nullable=False)
    image = image_column()

    @dy.rule()
    def box_is_ordered(cls) -> pl.Expr:
        """The box has x2 > x1 and y2 > y1."""
        return grid_box_is_valid(cls.bbox_2d.col)


class PseudoGtAuditPrecision(dy.Schema):
    """Precision of one confidence bin (or of all boxes, bin ``"all"``) with its 95% Wilson interval."""

    confidence_bin = dy.String(primary_key=True, min_length=1)
    bin_low = dy.Float64(nullable=False)
    bin_high = dy.Float64(nullable=False)
    audited = dy.Int64(nullable=False, min=0)
    correct = dy.Int64(nullable=False, min=0)
    precision = dy.Float64(nullable=True, min=0.0, max=1.0)
    ci_low = dy.Float64(nullable=False, min=0.0, max=1.0)
    ci_high = dy.Float64(nullable=False, min=0.0, max=1.0)

    @dy.rule()
    def correct_within_audited(cls) -> pl.Expr:
        """No more correct boxes than audited ones; precision only where something was audited."""
        return (cls.correct.col <= cls.audited.col) & ((cls.audited.col > 0) | cls.precision.col.is_null())
