"""Contract for ``stvqa``: the SpatialThinker training table (STVQA-7K columns plus the GT scene).

One row per multiple-choice question. The STVQA-7K columns keep their published meaning where the
reward and loader read them:

- ``images``: a one-image list (Hugging Face image cells); ``image_width``/``image_height`` its size;
- ``problem``: SpatialThinker's full prompt (``<image>`` token, the observe/scene/think/answer
  template, the ``Image size: (W x H)`` line) followed by ``Q. `` and ``question_with_options``;
- ``question_only``; ``question_with_options`` (the question, then ``Options:`` and ``(A) text`` lines);
- ``options``: option texts without letters, in the (shuffled) order shown;
- ``answer`` and ``answer_only``: the gold letter; ``answer_text``: the gold option's text;
  ``answer_option_text``: ``"(B) text"``, what the accuracy reward compares against;
- ``category`` (nine), ``level`` (easy/medium/hard), ``rating`` (1-10, null when a published row has none);
- ``gt_scene``: ``{objects: [{id "name.N", bbox_2d (0..1000)}], relationships: [{subject, predicate,
  object}]}``, the spatial reward's ground truth (converted to pixels by the reward);
- ``split``: ``train`` or ``val``.
"""

from __future__ import annotations

import dataframely as dy
import polars as pl

from data_contracts.columns import image_column
from data_contracts.stvqa_candidates import (
    CATEGORIES,
    LETTERS,
    LEVELS,
    gt_boxes_are_ordered,
    gt_scene_column,
    one_of,
)

CONTRACT_VERSION = "1.0.0"
SPLITS = ["train", "val"]


class Stvqa(dy.Schema):
    """A SpatialThinker training question with its image and ground-truth scene."""

    image_id = dy.String(nullable=False, min_length=1)
    images = dy.List(image_column(), nullable=False, min_length=1, max_length=1)
    problem = dy.String(nullable=False, regex=r"Image size: \(\d+ x \d+\)")
    question_only = dy.String(nullable=False, min_length=1)
    question_with_options = dy.String(nullable=False, min_length=1)
    options = dy.List(dy.String(nullable=False, min_length=1), nullable=False, min_length=2, max_length=4)
    answer = dy.String(nullable=False, regex=r"^[A-D]$")
    answer_only = dy.String(nullable=False, regex=r"^[A-D]$")
    answer_text = dy.String(nullable=False, min_length=1)
    answer_option_text = dy.String(nullable=False, regex=r"^\([A-D]\) .+")
    category = dy.String(nullable=False, regex=one_of(CATEGORIES))
    level = dy.String(nullable=False, regex=one_of(LEVELS))
    rating = dy.Int64(nullable=True, min=1, max=10)
    image_width = dy.Int64(nullable=False, min=1)
    image_height = dy.Int64(nullable=False, min=1)
    gt_scene = gt_scene_column()
    split = dy.String(nullable=False, regex=one_of(SPLITS))

    @dy.rule()
    def gold_letter_inside_options(cls) -> pl.Expr:
        """The gold letter names one of the options, and ``answer_only`` repeats it."""
        index = pl.lit(LETTERS).str.find(cls.answer.col, literal=True)
        return (
            index.is_not_null()
            & (index < cls.options.col.list.len())
            & (cls.answer_only.col == cls.answer.col)
        )

    @dy.rule()
    def answer_texts_match_option(cls) -> pl.Expr:
        """``answer_text`` is the gold option and ``answer_option_text`` is ``"(letter) answer_text"``."""
        index = pl.lit(LETTERS).str.find(cls.answer.col, literal=True)
        gold_option = cls.options.col.list.get(index, null_on_oob=True)
        return (cls.answer_text.col == gold_option) & (
            cls.answer_option_text.col
            == pl.concat_str([pl.lit("("), cls.answer.col, pl.lit(") "), cls.answer_text.col])
        )

    @dy.rule()
    def problem_states_image_size(cls) -> pl.Expr:
        """The ``Image size: (W x H)`` line of ``problem`` states the row's image size."""
        size = pl.concat_str(
            [
                pl.lit("Image size: ("),
                cls.image_width.col.cast(pl.String),
                pl.lit(" x "),
                cls.image_height.col.cast(pl.String),
                pl.lit(")"),
            ]
        )
        return cls.problem.col.str.contains(size, literal=True)

    @dy.rule()
    def gt_boxes_valid(cls) -> pl.Expr:
        """Every ground-truth box is a canonical box with area."""
        return gt_boxes_are_ordered(cls.gt_scene.col)
