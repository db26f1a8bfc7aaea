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
- ``split``: ``train`` or ``val``;
- ``origin`` (1.1.0): 'sample_world' or 'real', the question's scene graph's (published STVQA-7K rows
  are 'real'); the trainer refuses a table that mixes the two unless told otherwise.
"""

from __future__ import annotations

import dataframely as dy
import polars as pl

from data_contracts.columns import image_column
from data_contracts.origin import origin_column
from data_contracts.stvqa_candidates import (
    CATEGORIES,
    LETTERS,
    LEVELS,
    gt_boxes_are_ordered,
    gt_scene_column,
    one_of,
)

CONTRACT_VERSION = "1.1.0"  # 1.1: origin
SPLITS = ["train", "val"]


class Stvqa(dy.Schema):
    """A SpatialThinker training question with its image and ground-truth scene."""

    image_id = dy.String(
        nullable=False,
        min_length=1,
        description="scene_graphs.image_id of the question's image (published STVQA-7K: its 'image_id', else "
        "'<file>:<row>'). Not unique: an image has several questions.",
    )
    images = dy.List(
        image_column(),
        nullable=False,
        min_length=1,
        max_length=1,
        description="A one-image list of Hugging Face image cells {bytes, path} (the scene_graphs image; "
        "published rows: their first image).",
    )
    problem = dy.String(
        nullable=False,
        regex=r"Image size: \(\d+ x \d+\)",
        description="The full prompt: SpatialThinker's template ('<image>' token, the observe / scene / think / "
        "answer structure with pixel boxes, the 'Image size: (W x H)' line in pixels), then 'Q. ' and "
        "question_with_options. A published row keeps its own problem when it states the image size.",
    )
    question_only = dy.String(nullable=False, min_length=1, description="The question text alone.")
    question_with_options = dy.String(
        nullable=False,
        min_length=1,
        description="The question, then a line 'Options:' and one '(A) text' line per option, in the shown order.",
    )
    options = dy.List(
        dy.String(nullable=False, min_length=1),
        nullable=False,
        min_length=2,
        max_length=4,
        description="2-4 option texts without letters, in the order shown (shuffled by a SHA-256 of seed, image "
        "id and question, identical in every process); option i has letter 'ABCD'[i].",
    )
    answer = dy.String(
        nullable=False, regex=r"^[A-D]$", description="Gold letter A-D of the option in the shown order."
    )
    answer_only = dy.String(
        nullable=False,
        regex=r"^[A-D]$",
        description="The gold letter again (STVQA-7K's column name); always equal to answer.",
    )
    answer_text = dy.String(
        nullable=False, min_length=1, description="Text of the gold option (options at the gold letter)."
    )
    answer_option_text = dy.String(
        nullable=False,
        regex=r"^\([A-D]\) .+",
        description="'(<letter>) <answer_text>', e.g. '(B) behind the chair': what the accuracy reward compares "
        "the model's <answer> with.",
    )
    category = dy.String(
        nullable=False,
        regex=one_of(CATEGORIES),
        description="One of the nine STVQA categories: relation, reach, size, orientation, instance_location, "
        "depth, distance, count, existence (the set balances relation to 50% by default).",
    )
    level = dy.String(
        nullable=False, regex=one_of(LEVELS), description="Difficulty: 'easy', 'medium' or 'hard'."
    )
    rating = dy.Int64(
        nullable=True,
        min=1,
        max=10,
        description="Quality rating 1-10 of the generated question; null when a published STVQA-7K row has none.",
    )
    image_width = dy.Int64(
        nullable=False,
        min=1,
        description="Image width in pixels, the W of the problem's 'Image size' line (published rows: that line, "
        "else the decoded image).",
    )
    image_height = dy.Int64(
        nullable=False,
        min=1,
        description="Image height in pixels, the H of the problem's 'Image size' line (published rows: that "
        "line, else the decoded image).",
    )
    gt_scene = gt_scene_column(
        description="The spatial reward's ground truth: objects {id 'name.N', bbox_2d} with bbox_2d canonical "
        "[x1, y1, x2, y2] on the 0..1000 grid (x right, y down; the reward converts to pixels), and "
        "relationships {subject, predicate, object} between those ids. Published rows: the <scene> JSON's pixel "
        "boxes moved to the grid (boxes that cannot be converted are dropped); empty lists when there is none."
    )
    split = dy.String(
        nullable=False,
        regex=one_of(SPLITS),
        description="'train' or 'val': generated rows split 90/10 by image (no image in both), published rows by "
        "their 'split' column or file name ('test' and 'validation' read as 'val').",
    )
    origin = origin_column("questions (their scene graph's origin; published STVQA-7K rows are 'real')")

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
