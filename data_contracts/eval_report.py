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

    run_name = dy.String(
        primary_key=True,
        min_length=1,
        description="The evaluation run: the configured name, else '<model folder>' or '<model folder>+<adapter "
        "folder>'.",
    )
    benchmark = dy.String(primary_key=True, min_length=1, description="eval_items.benchmark of the item.")
    item_id = dy.String(primary_key=True, min_length=1, description="eval_items.item_id of the item.")
    model = dy.String(
        nullable=False,
        min_length=1,
        description="The evaluated model as configured: a local folder, a Hub id, or the API model name.",
    )
    adapter = dy.String(
        nullable=True, description="LoRA adapter folder applied to the model; null without one."
    )
    backend = dy.String(
        nullable=False, description="Generation backend: 'transformers', 'vllm' or 'openai' (any API server)."
    )
    prompt_format = dy.String(
        nullable=False,
        description="Output format the item was asked and scored in: 'spatialcore' (bbox lines, </think>, "
        "letter), 'spatialthinker' (<observe>/<scene>/<think>/<answer>) or 'dge' (always for numeric items).",
    )
    category = dy.String(nullable=False, description="eval_items.category of the item.")
    task_type = dy.String(nullable=False, description="eval_items.task_type of the item.")
    source = dy.String(nullable=False, description="eval_items.source of the item.")
    question_key = dy.String(
        nullable=False,
        description="eval_items.question_key: groups the variants scored together by CircularEval and FlipEval.",
    )
    flipped = dy.Bool(
        nullable=False, description="eval_items.flipped: a horizontally flipped copy (3DSRBench)."
    )
    circular_index = dy.Int64(
        nullable=False,
        min=0,
        description="eval_items.circular_index: rotation of the options, 0 for the original.",
    )
    answer_format = dy.String(nullable=False, description="eval_items.answer_format: 'choice' or 'numeric'.")
    gold = dy.String(
        nullable=False,
        description="The gold answer as text (eval_items.answer): a letter, or a number without its unit.",
    )
    completion = dy.String(
        nullable=True, description="The model's raw completion text; null when the backend returned nothing."
    )
    finish_reason = dy.String(
        nullable=True,
        description="Why generation stopped, as the backend reports it: 'stop', 'length' (token limit), 'error' "
        "(no completion), or a provider's own reason ('max_tokens', 'content_filter', ...); null when unknown.",
    )
    predicted = dy.String(
        nullable=True,
        description="What the strict scorer read: the letter, or the number converted to the item's unit as "
        "text; null when no answer was read (unparseable, truncated, error).",
    )
    status = dy.Enum(
        STATUSES,
        nullable=False,
        description="'correct'; 'wrong' (an answer of the expected form that is not the gold one, or a number "
        "with partial credit); 'unparseable' (no answer of the expected form, a missing closing tag included); "
        "'truncated' (finish_reason 'length' or 'max_tokens': no answer, whatever the text); 'error' (no "
        "completion).",
    )
    score = dy.Float64(
        nullable=False,
        min=0.0,
        max=1.0,
        description="1 or 0 for multiple choice; mean relative accuracy in [0, 1] for numeric items; 0 for "
        "unparseable, truncated and failed predictions.",
    )
    n_boxes = dy.Int64(
        nullable=False,
        min=0,
        description="Boxes the completion drew: SpatialCORE's valid reasoning boxes, or SpatialThinker's <scene> "
        "objects (a box that cannot be put on the grid still counts); 0 without boxes and for numeric items.",
    )
    box_uncertainty = dy.Float64(
        nullable=True,
        description="Mean coordinate-digit entropy H in [0, 1] of the drawn boxes (SpatialCORE completions, from "
        "the grounding analysis's scoring pass); null without boxes or without that pass.",
    )
    matched_iou = dy.Float64(
        nullable=True,
        description="Mean over the drawn boxes of the IoU with the reference box assigned by Hungarian matching "
        "on the 0..1000 grid (unmatched or unreadable boxes count 0); null without boxes or without reference "
        "boxes of validity > 0.",
    )

    @dy.rule()
    def only_answers_score(cls) -> pl.Expr:
        """Unparseable, truncated and failed predictions score 0."""
        return cls.status.col.is_in(["correct", "wrong"]) | (cls.score.col == 0.0)

    @dy.rule()
    def correct_scores_one(cls) -> pl.Expr:
        """A correct prediction scores 1."""
        return (cls.status.col != "correct") | (cls.score.col == 1.0)
