"""Contract for ``dge_tasks``: one row per exact spatial question of SpatialEvo's DGE.

A row shows one or more frames (``images``, Hugging Face image cells, in the order of
``frame_indices``) and asks one question of a task type. Multiple-choice rows have ``options``, the
0-based ``answer_index`` and the gold letter ``answer``; numeric rows have no options, the value in
``numeric_answer`` (and as text in ``answer``) and, for measurements, its ``unit``. ``facts`` is
JSON with the geometric facts that justify the answer (for audit), including the question's
``spec`` from which the answer can be recomputed. ``geometry_source`` says whether the answer
comes from a scan (``scanned``) or from one image's estimated depth (``estimated``); the two are
never mixed in one row. ``origin`` (1.1.0) is the scan's (``rgbd_scenes.origin``) or, for an
estimated row, the image's (``scene_graphs.origin``): 'sample_world' or 'real'. ``dataset`` (1.2.0) is
the data set of the scan (``rgbd_scenes.source``: 'scannet', 'arkitscenes', 'scannetpp') or, for an
estimated row, 'visual_genome'.
"""

from __future__ import annotations

import dataframely as dy
import polars as pl

from data_contracts.columns import image_column
from data_contracts.mcq_questions import LETTERS
from data_contracts.origin import origin_column
from data_contracts.scan_datasets import IMAGE_DATASET, dataset_column

CONTRACT_VERSION = "1.2.0"  # 1.2: dataset; 1.1: origin

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

    task_id = dy.String(
        primary_key=True,
        min_length=1,
        description="'<scene_id>/<task_type>/<10 hex digits>': a SHA-256 of the question's spec, stable across "
        "rebuilds.",
    )
    scene_id = dy.String(
        nullable=False,
        min_length=1,
        description="The scan (rgbd_scenes.scene_id) for scanned rows; the scene_graphs.image_id for "
        "estimated rows (dge_image_tasks).",
    )
    task_type = dy.String(
        nullable=False,
        description="One of the 16 DGE task types (TASK_TYPES, e.g. 'object_count', 'depth_order', "
        "'camera_motion'); the trainer's task-adaptive scheduler keys on it.",
    )
    images = dy.List(
        image_column(),
        nullable=False,
        min_length=1,
        description="The frames shown, as Hugging Face image cells {bytes, path}, in frame_indices order: the "
        "colour files as they are (path '<scene_id>/<frame_index>.<ext>'), re-encoded as JPEG when "
        "image_max_side is set; an estimated row shows its scene_graphs image.",
    )
    frame_indices = dy.List(
        dy.Int64(nullable=False),
        nullable=False,
        min_length=1,
        description="rgbd_frames.frame_index of each image (ScanNet frame numbers, not positions); [0] for an "
        "estimated row's single image.",
    )
    question = dy.String(nullable=False, min_length=1, description="The question text, without the options.")
    options = dy.List(
        dy.String(nullable=False, min_length=1),
        nullable=False,
        max_length=len(LETTERS),
        description="Option texts of a multiple-choice row, in the order shown (option i has letter "
        "'ABCDEFGH'[i]); empty for a numeric row.",
    )
    answer_index = dy.Int64(
        nullable=True,
        min=0,
        description="0-based index of the gold option; null for a numeric row.",
    )
    answer = dy.String(
        nullable=False,
        min_length=1,
        description="The gold answer as text: the letter of answer_index, or numeric_answer written with the "
        "precision the question states (m: 2 decimals; cm: 0 decimals from 10 cm up, 1 below; m^2: 1; counts: 0) "
        "and without the unit.",
    )
    numeric_answer = dy.Float64(
        nullable=True,
        description="The numeric answer computed from the geometry, in unit, rounded to the precision the "
        "question states (see answer; counts are whole numbers); null for a multiple-choice row.",
    )
    unit = dy.String(
        nullable=True,
        description="Unit of numeric_answer: 'm' (metres), 'cm' (centimetres) or 'm^2' (square metres); null "
        "for counts and multiple-choice rows.",
    )
    facts = dy.String(
        nullable=False,
        min_length=2,
        description="JSON (sorted keys) of what justifies the answer, for audit: spec (object ids, frame "
        "indices, options; the answer can be recomputed from it), values (the measured geometry), "
        "geometry_source, margins (the settings that decided the answer was clear) and, for estimated "
        "geometry, provenance.",
    )
    geometry_source = dy.String(
        nullable=False,
        description="'scanned' (from the scan's fused geometry) or 'estimated' (from one image's depth file or "
        "monocular depth model); never mixed in one row.",
    )
    split = dy.String(
        nullable=False,
        min_length=1,
        description="'train' or 'test', by a stable SHA-256 hash of scene_id (10% of scenes test by default), "
        "so all questions of one scene share a split.",
    )
    origin = origin_column(
        "questions (the scan's rgbd_scenes.origin; an estimated row's scene_graphs.origin)"
    )
    dataset = dataset_column(
        "the question's scan (rgbd_scenes.source) or, for an estimated row, its image", (IMAGE_DATASET,)
    )

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
