"""Contract for ``eval_report``: one row per scored prediction of one evaluated model on one benchmark item.

A run (``run_name``) is one model, optionally with a LoRA adapter, served by one backend and prompted
in one output format. Each row keeps the raw completion and how it stopped, what the strict scorer
read from it, and the outcome:

* ``status``: ``correct``, ``wrong`` (an answer was read but it is not the gold one, or a number with
  partial credit), ``unparseable`` (no answer of the expected form), ``truncated`` (the completion did
  not finish: the token limit was hit, or the format's closing tag is missing), ``error`` (the backend
  returned nothing). Only ``correct`` and partially right numeric answers score above 0.
* ``score``: 1/0 for multiple choice, mean relative accuracy in [0, 1] for numeric answers.

The grounding columns are filled when the run drew boxes: ``n_boxes`` valid reasoning boxes,
``box_uncertainty`` their mean coordinate-digit entropy ``H`` (NaN without an entropy pass) and
``matched_iou`` their mean Hungarian-matched IoU with the item's reference boxes (null without
reference boxes).
"""

from __future__ import annotations

import dataframely as dy
import polars as pl

CONTRACT_VERSION = "1.0.0"

STATUSES = ["correct", "wrong", "unparseable", "truncated", "error"]


class EvalReport(dy.Schema):
    """A scored prediction."""

    run_name = dy.String(primary_key=True, min_length=1)
    benchmark = dy.String(primary_key=True, min_length=1)
    item_id = dy.String(primary_key=True, min_length=1)
    model = dy.String(nullable=False, min_length=1)
    adapter = dy.String(nullable=True)
    backend = dy.String(nullable=False)
    prompt_format = dy.String(nullable=False)
    category = dy.String(nullable=False)
    task_type = dy.String(nullable=False)
    source = dy.String(nullable=False)
    question_key = dy.String(nullable=False)
    flipped = dy.Bool(nullable=False)
    circular_index = dy.Int64(nullable=False, min=0)
    answer_format = dy.String(nullable=False)
    gold = dy.String(nullable=False)
    completion = dy.String(nullable=True)
    finish_reason = dy.String(nullable=True)
    predicted = dy.String(nullable=True)
    status = dy.Enum(STATUSES, nullable=False)
    score = dy.Float64(nullable=False, min=0.0, max=1.0)
    n_boxes = dy.Int64(nullable=False, min=0)
    box_uncertainty = dy.Float64(nullable=True)
    matched_iou = dy.Float64(nullable=True)

    @dy.rule()
    def only_answers_score(cls) -> pl.Expr:
        """Unparseable, truncated and failed predictions score 0."""
        return cls.status.col.is_in(["correct", "wrong"]) | (cls.score.col == 0.0)

    @dy.rule()
    def correct_scores_one(cls) -> pl.Expr:
        """A correct prediction scores 1."""
        return (cls.status.col != "correct") | (cls.score.col == 1.0)
