"""Contract for ``stvqa_candidates``: one row per generated STVQA question that passed the checks.

Rows come from the template generator or an LLM (``generator`` says which, ``prompt_version`` which
prompt or template set). ``options`` are in generation order and ``answer`` is the gold letter of
``answer_index``. ``gt_scene`` is the question's ground-truth subgraph: the objects the question and
options name, as ``name.N`` ids with canonical (0..1000) boxes, and the relations among them.
``gt_note`` records a corrected count answer. ``facts`` is JSON with the values that justify a
template answer (null for LLM items). The table is partitioned by ``shard`` (see
``assets/stvqa/shards.py``). ``origin`` (1.1.0) is the scene graph's: 'sample_world' or 'real'.
"""

from __future__ import annotations

import dataframely as dy
import polars as pl

from data_contracts.columns import all_grid_boxes_valid, grid_box_column
from data_contracts.origin import origin_column

CONTRACT_VERSION = "1.1.0"  # 1.1: origin

CATEGORIES = [
    "relation",
    "reach",
    "size",
    "orientation",
    "instance_location",
    "depth",
    "distance",
    "count",
    "existence",
]
LEVELS = ["easy", "medium", "hard"]
LETTERS = "ABCD"


def one_of(values: list[str]) -> str:
    """A regex accepting exactly these words (plain strings survive Parquet round trips, unlike enums).

    >>> one_of(["easy", "hard"])
    '^(?:easy|hard)$'
    """
    return "^(?:" + "|".join(values) + ")$"


def gt_scene_column(*, nullable: bool = False, description: str | None = None) -> dy.Struct:
    """``{objects: [{id "name.N", bbox_2d (0..1000)}], relationships: [{subject, predicate, object}]}``."""
    return dy.Struct(
        {
            "objects": dy.List(
                dy.Struct(
                    {"id": dy.String(nullable=False, min_length=1), "bbox_2d": grid_box_column()},
                    nullable=False,
                ),
                nullable=False,
            ),
            "relationships": dy.List(
                dy.Struct(
                    {
                        "subject": dy.String(nullable=False),
                        "predicate": dy.String(nullable=False),
                        "object": dy.String(nullable=False),
                    },
                    nullable=False,
                ),
                nullable=False,
            ),
        },
        nullable=nullable,
        description=description,
    )


def gt_boxes_are_ordered(column: pl.Expr) -> pl.Expr:
    """Every ground-truth box of a ``gt_scene`` struct has ``x2 > x1`` and ``y2 > y1``."""
    return all_grid_boxes_valid(column.struct.field("objects"), "bbox_2d")


class StvqaCandidates(dy.Schema):
    """A generated multiple-choice spatial question about one scene-graph image."""

    question_id = dy.String(
        primary_key=True,
        min_length=1,
        description="'<image_id>-<12 hex digits>': the image id and a SHA-256 of the question text and options, "
        "stable across rebuilds.",
    )
    image_id = dy.String(
        nullable=False, min_length=1, description="The scene_graphs.image_id the question is about."
    )
    shard = dy.String(
        nullable=False,
        regex=r"^\d{2}$",
        description="Partition key '00' .. '31': SHA-256 of image_id modulo 32, so an image always lands in the "
        "same shard.",
    )
    question = dy.String(nullable=False, min_length=1, description="The question text, without the options.")
    options = dy.List(
        dy.String(nullable=False, min_length=1),
        nullable=False,
        min_length=2,
        max_length=4,
        description="2-4 distinct option texts in generation order, without '(A)' labels (option i has letter "
        "'ABCD'[i]); stvqa shuffles them later.",
    )
    answer = dy.String(
        nullable=False,
        regex=r"^[A-D]$",
        description="Gold letter A-D, the letter of answer_index (after a count correction, see gt_note).",
    )
    answer_index = dy.Int64(
        nullable=False, min=0, max=3, description="0-based index of the gold option in options."
    )
    category = dy.String(
        nullable=False,
        regex=one_of(CATEGORIES),
        description="One of the nine STVQA categories: relation, reach, size, orientation, instance_location, "
        "depth, distance, count, existence.",
    )
    level = dy.String(
        nullable=False, regex=one_of(LEVELS), description="Difficulty: 'easy', 'medium' or 'hard'."
    )
    rating = dy.Int64(
        nullable=False,
        min=1,
        max=10,
        description="Quality rating 1-10: the LLM generator's own rating, or the template's (higher for more "
        "spatial reasoning and for answers backed by metric geometry); stvqa keeps the top-rated per category.",
    )
    generator = dy.String(
        nullable=False,
        min_length=1,
        description="Who wrote the question: 'template' (the offline templates) or '<provider>:<model>' of the "
        "LLM (e.g. 'anthropic:claude-sonnet-4-20250514').",
    )
    prompt_version = dy.String(
        nullable=False,
        min_length=1,
        description="Version of the template set ('stvqa-templates-v1') or of the generation prompt.",
    )
    template = dy.String(
        nullable=True, description="Name of the template that wrote the question; null for LLM questions."
    )
    facts = dy.String(
        nullable=True,
        description="JSON (sorted keys) of the scene-graph values that justify a template's answer, for audit; "
        "null for LLM questions.",
    )
    image_width = dy.Int64(
        nullable=False, min=1, description="Image width in pixels (scene_graphs.image_width)."
    )
    image_height = dy.Int64(
        nullable=False, min=1, description="Image height in pixels (scene_graphs.image_height)."
    )
    gt_scene = gt_scene_column(
        description="Ground-truth subgraph of the question, the spatial reward's truth: objects {id, bbox_2d} "
        "named in the question or options (lemma match on the filtered scene: duplicates merged, ids 'name.N' "
        "with N counting objects of that name, 1-based), bbox_2d canonical [x1, y1, x2, y2] on the 0..1000 grid "
        "(x right, y down); relationships {subject, predicate, object} between those ids. Empty lists when the "
        "question names no object of the scene."
    )
    gt_note = dy.String(
        nullable=True,
        description="Note of a corrected count answer ('count corrected: gold B said ..., the filtered scene has "
        "N ...; gold moved to C'); null when the gold answer was kept as generated.",
    )
    source = dy.String(
        nullable=False,
        description="scene_graphs.source of the image: 'visual_genome', 'vg150' or 'vg150_prompt'.",
    )
    origin = origin_column("questions (scene_graphs.origin of the image)")

    @dy.rule()
    def gold_inside_options(cls) -> pl.Expr:
        """The gold index points at an option and the gold letter is its letter."""
        return (cls.answer_index.col < cls.options.col.list.len()) & (
            cls.answer.col == pl.lit(LETTERS).str.slice(cls.answer_index.col, 1)
        )

    @dy.rule()
    def options_are_distinct(cls) -> pl.Expr:
        """No two options are the same text (ignoring case and surrounding spaces)."""
        normalised = cls.options.col.list.eval(pl.element().str.strip_chars().str.to_lowercase())
        return normalised.list.n_unique() == cls.options.col.list.len()

    @dy.rule()
    def gt_boxes_valid(cls) -> pl.Expr:
        """Every ground-truth box is a canonical box with area."""
        return gt_boxes_are_ordered(cls.gt_scene.col)
