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
from pydantic import BaseModel, Field

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


class SpatialcoreTrainSettings(BaseModel):
    """Which questions the table holds (the ``spatialcore_train`` run config extends this model)."""

    sources: list[str] = Field(default=["omnispatial"], description="Question sources in the table.")
    splits: list[str] = Field(
        default=[], description="Splits in the table (empty: all; the split column tells them apart)."
    )


def build_spatialcore_train(
    questions: pl.DataFrame, pseudo_gt_boxes: pl.DataFrame, settings: SpatialcoreTrainSettings | None = None
) -> pl.DataFrame:
    """Join questions with their pseudo-GT into the `spatialcore_train` columns, sorted by `question_id`.

    Args:
        questions (`pl.DataFrame`): an `mcq_questions` frame.
        pseudo_gt_boxes (`pl.DataFrame`): `question_id` and `pseudo_gt` (other columns are ignored;
            ids that are not among the questions are ignored).
        settings (`SpatialcoreTrainSettings`, *optional*): the sources and splits kept (OmniSpatial, every
            split, by default).

    Returns:
        `pl.DataFrame`: the columns of :class:`~data_contracts.spatialcore_train.SpatialcoreTrain` (without
        ``image`` when the questions name their images by ``image_sha256`` only, as ``mcq_questions`` does:
        :func:`data_contracts.image_store.embed_images` adds it).
    """
    settings = settings or SpatialcoreTrainSettings()
    schema = polars_schema(SpatialcoreTrain)
    selected = select_training_questions(questions, settings.sources, settings.splits or None)
    boxes = pseudo_gt_boxes.select("question_id", pl.col("pseudo_gt").cast(schema["pseudo_gt"])).unique(
        "question_id", keep="first"
    )
    joined = selected.join(boxes, on="question_id", how="left").with_columns(
        pl.col("pseudo_gt").fill_null(pl.lit([], dtype=schema["pseudo_gt"]))
    )
    return joined.select([name for name in schema if name in joined.columns]).sort("question_id")
