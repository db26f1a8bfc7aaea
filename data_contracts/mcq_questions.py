"""Contract for ``mcq_questions``: one row per multiple-choice question about one image.

Sources: OmniSpatial (``answer`` is a 0-based index) and SpatiaLab (``Answer`` is 1-based); both are
normalised here to a 0-based ``answer_index`` and the gold letter ``answer`` derived from it (the
gold is never read back out of option text).
"""

from __future__ import annotations

import dataframely as dy
import polars as pl

from data_contracts.columns import image_column

CONTRACT_VERSION = "1.0.0"
LETTERS = "ABCDEFGH"


class McqQuestions(dy.Schema):
    """A multiple-choice spatial question with its image and gold answer."""

    question_id = dy.String(primary_key=True, min_length=1)
    image = image_column()
    image_width = dy.Int64(nullable=False, min=1)
    image_height = dy.Int64(nullable=False, min=1)
    question = dy.String(nullable=False, min_length=1)
    options = dy.List(dy.String(nullable=False), nullable=False, max_length=len(LETTERS))
    answer_index = dy.Int64(nullable=False, min=0)
    answer = dy.String(nullable=False, regex=r"^[A-H]$")
    task_type = dy.String(nullable=False)
    sub_task_type = dy.String(nullable=False)
    split = dy.String(nullable=False)
    source = dy.String(nullable=False)

    @dy.rule()
    def answer_index_in_options(cls) -> pl.Expr:
        """The gold index points at an option (rows whose options are drawn in the image have none)."""
        return (cls.options.col.list.len() == 0) | (cls.answer_index.col < cls.options.col.list.len())

    @dy.rule()
    def letter_matches_index(cls) -> pl.Expr:
        """The gold letter is the letter of ``answer_index``."""
        letters = pl.lit(LETTERS)
        return cls.answer.col == letters.str.slice(cls.answer_index.col, 1)
