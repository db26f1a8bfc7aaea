"""Contract for ``dge_tasks``: one row per exact spatial question of SpatialEvo's DGE.

A row shows one or more frames (``images``, Hugging Face image cells, in the order of
``frame_indices``) and asks one question of a task type. Multiple-choice rows have ``options``, the
0-based ``answer_index`` and the gold letter ``answer``; numeric rows have no options, the value in
``numeric_answer`` (and as text in ``answer``) and, for measurements, its ``unit``. ``facts`` is
JSON with the geometric facts that justify the answer (for audit), including the question's
``spec`` from which the answer can be recomputed. ``geometry_source`` says whether the answer
comes from a scan (``scanned``) or from one image's estimated depth (``estimated``); the two are
never mixed in one row.
"""

from __future__ import annotations

import dataframely as dy
import polars as pl

from data_contracts.columns import image_column
from data_contracts.mcq_questions import LETTERS

CONTRACT_VERSION = "1.0.0"

TASK_TYPES = [
    "object_count",
    "object_size",
    "camera_object_distance",
    "absolute_distance",
    "relative_distance",
    "depth_order",
    "relative_direction_scene",
    "relative_direction_image",
    "room_size",
    "camera_camera_position",
    "camera_camera_elevation",
    "visibility_comparison",
    "camera_object_position",
    "camera_region_position",
    "camera_motion",
    "attribute_measurement",
]
"""The 16 DGE task types (stable names; the trainer's scheduler keys on them)."""

NUMERIC_UNITS = ["m", "cm", "m^2"]
GEOMETRY_SOURCES = ["scanned", "estimated"]


class DgeTasks(dy.Schema):
    """An exact spatial question with its frames, answer and justifying facts."""

    task_id = dy.String(primary_key=True, min_length=1)
    scene_id = dy.String(nullable=False, min_length=1)
    task_type = dy.String(nullable=False)
    images = dy.List(image_column(), nullable=False, min_length=1)
    frame_indices = dy.List(dy.Int64(nullable=False), nullable=False, min_length=1)
    question = dy.String(nullable=False, min_length=1)
    options = dy.List(dy.String(nullable=False, min_length=1), nullable=False, max_length=len(LETTERS))
    answer_index = dy.Int64(nullable=True, min=0)
    answer = dy.String(nullable=False, min_length=1)
    numeric_answer = dy.Float64(nullable=True)
    unit = dy.String(nullable=True)
    facts = dy.String(nullable=False, min_length=2)
    geometry_source = dy.String(nullable=False)
    split = dy.String(nullable=False, min_length=1)

    @dy.rule()
    def known_values(cls) -> pl.Expr:
        """Task type, unit and geometry source take their documented values."""
        return (
            cls.task_type.col.is_in(TASK_TYPES)
            & (cls.unit.col.is_null() | cls.unit.col.is_in(NUMERIC_UNITS))
            & cls.geometry_source.col.is_in(GEOMETRY_SOURCES)
        )

    @dy.rule()
    def images_match_frames(cls) -> pl.Expr:
        """One image per frame index."""
        return cls.images.col.list.len() == cls.frame_indices.col.list.len()

    @dy.rule()
    def choice_or_numeric(cls) -> pl.Expr:
        """Multiple choice (options, index, no number) or numeric (no options, no index, a number)."""
        has_options = cls.options.col.list.len() > 0
        choice = has_options & cls.answer_index.col.is_not_null() & cls.numeric_answer.col.is_null()
        numeric = ~has_options & cls.answer_index.col.is_null() & cls.numeric_answer.col.is_not_null()
        return choice | numeric

    @dy.rule()
    def choice_answer_consistent(cls) -> pl.Expr:
        """The gold index points at an option and the gold letter is its letter."""
        letters = pl.lit(LETTERS)
        return cls.answer_index.col.is_null() | (
            (cls.answer_index.col < cls.options.col.list.len())
            & (cls.answer.col == letters.str.slice(cls.answer_index.col, 1))
        )

    @dy.rule()
    def unit_only_for_numbers(cls) -> pl.Expr:
        """Only numeric rows carry a unit (counts have none)."""
        return cls.unit.col.is_null() | cls.numeric_answer.col.is_not_null()
