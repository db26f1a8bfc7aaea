"""The ``spatialcore_train`` table: OmniSpatial questions joined with their pseudo-GT boxes.

Columns are exactly what the SpatialCORE reward functions receive (see
:mod:`data_contracts.spatialcore_train`): the gold answer as a 0-based index and its letter (both
taken from the question table, which derives the letter from the index), and ``pseudo_gt`` (empty
when the question has no reference: the spatial reward is then zero).

>>> import polars as pl
>>> questions = pl.DataFrame({"question_id": ["omnispatial/1_0", "spatialab/3"], "source": ["omnispatial", "spatialab"],
...                           "split": ["train", "test"]})
>>> boxes = pl.DataFrame({"question_id": ["omnispatial/1_0"],
...                       "pseudo_gt": [[{"bbox_2d": [1, 2, 30, 40], "label": "cup", "validity": 0.7}]]})
>>> select_training_questions(questions, ["omnispatial"]).height
1
"""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl

from data_contracts.spatialcore_train import SpatialcoreTrain
from data_contracts.validation import polars_schema


def select_training_questions(
    questions: pl.DataFrame, sources: Sequence[str] = ("omnispatial",), splits: Sequence[str] | None = None
) -> pl.DataFrame:
    """The questions of the given sources (and splits, when given)."""
    selected = questions.filter(pl.col("source").is_in(list(sources)))
    if splits:
        selected = selected.filter(pl.col("split").is_in(list(splits)))
    return selected


def build_spatialcore_train(
    questions: pl.DataFrame,
    pseudo_gt_boxes: pl.DataFrame,
    sources: Sequence[str] = ("omnispatial",),
    splits: Sequence[str] | None = None,
) -> pl.DataFrame:
    """Join questions with their pseudo-GT into the `spatialcore_train` columns, sorted by `question_id`.

    Args:
        questions (`pl.DataFrame`): an `mcq_questions` frame.
        pseudo_gt_boxes (`pl.DataFrame`): `question_id` and `pseudo_gt` (other columns are ignored;
            ids that are not among the questions are ignored).
        sources (`Sequence[str]`, *optional*): question sources kept (OmniSpatial for training).
        splits (`Sequence[str]`, *optional*): splits kept; all when `None` (the `split` column tells them apart).

    Returns:
        `pl.DataFrame`: the columns of :class:`~data_contracts.spatialcore_train.SpatialcoreTrain`.
    """
    schema = polars_schema(SpatialcoreTrain)
    selected = select_training_questions(questions, sources, splits)
    boxes = pseudo_gt_boxes.select("question_id", pl.col("pseudo_gt").cast(schema["pseudo_gt"])).unique(
        "question_id", keep="first"
    )
    joined = selected.join(boxes, on="question_id", how="left").with_columns(
        pl.col("pseudo_gt").fill_null(pl.lit([], dtype=schema["pseudo_gt"]))
    )
    return joined.select(list(schema)).sort("question_id")
