"""Corrupted pseudo-GT for robustness studies (SpatialCORE appendix A.3, Table 5).

A given fraction of all valid pseudo-GT boxes (40% in the paper) is chosen at random (seeded), and
each chosen box is, at random, **removed**, **relabelled** with the label of a different valid object
of the same sample, or **displaced** until its IoU with the original box falls below 0.6. A box that
cannot be relabelled (its sample has no other label) is removed or displaced instead. The table keeps
the ``spatialcore_train`` columns, so the trainer reads it unchanged.

>>> import numpy as np
>>> box = [100, 100, 300, 300]
>>> moved = displace_box(box, np.random.default_rng(0), max_iou=0.6)
>>> box_iou(box, moved) < 0.6, moved[2] - moved[0], moved[3] - moved[1]
(True, 200, 200)
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import ClassVar, Self

import numpy as np
import polars as pl
from pydantic import BaseModel, Field, model_validator

from data_contracts.boxes import GRID_SIZE

logger = logging.getLogger(__name__)

MODES = ("remove", "relabel", "displace")
DISPLACEMENT_ATTEMPTS = 200


class CorruptionSettings(BaseModel):
    """What to corrupt (the ``spatialcore_train_corrupted`` run config extends this model).

    ``max_iou`` (how far a displaced box moves) is a ``ClassVar``, a constant of the method, not run configuration.
    """

    fraction: float = Field(default=0.4, description="Share of all valid boxes to corrupt (paper: 0.4).")
    seed: int = Field(default=0, description="Seed of every random choice.")
    modes: list[str] = Field(
        default=list(MODES), description="Corruptions drawn from: remove, relabel, displace."
    )

    # Constant of the method (not run configuration; a test may override it in a subclass).
    max_iou: ClassVar[float] = 0.6
    """A displaced box's IoU with the original stays below this."""

    @model_validator(mode="after")
    def _check_values(self) -> Self:
        if not 0.0 <= self.fraction <= 1.0:
            raise ValueError(f"fraction must lie in [0, 1], got {self.fraction}")
        unknown = set(self.modes) - set(MODES)
        if unknown or not self.modes:
            raise ValueError(f"modes must be a non-empty subset of {MODES}, got {list(self.modes)}")
        return self


@dataclass
class CorruptionStats:
    """How many boxes there were, how many were chosen, and what was done to them."""

    boxes: int = 0
    chosen: int = 0
    by_mode: dict[str, int] = field(default_factory=dict)


def box_iou(first: Sequence[float], second: Sequence[float]) -> float:
    """Intersection over union of two `[x1, y1, x2, y2]` boxes.

    Example:
        >>> box_iou([0, 0, 10, 10], [5, 0, 15, 10])
        0.3333333333333333
    """
    width = max(0.0, min(first[2], second[2]) - max(first[0], second[0]))
    height = max(0.0, min(first[3], second[3]) - max(first[1], second[1]))
    intersection = width * height
    union = (
        (first[2] - first[0]) * (first[3] - first[1])
        + (second[2] - second[0]) * (second[3] - second[1])
        - intersection
    )
    return intersection / union if union > 0 else 0.0


def displace_box(box: Sequence[int], rng: np.random.Generator, max_iou: float = 0.6) -> list[int]:
    """Move a grid box (same size, inside the grid) until its IoU with the original is below ``max_iou``.

    A box too large to move that far (most of the image) is shrunk and moved instead; as a last resort a
    random box anywhere with low enough IoU is drawn.
    """
    x1, y1, x2, y2 = (int(value) for value in box)
    width, height = x2 - x1, y2 - y1
    for attempt in range(DISPLACEMENT_ATTEMPTS):
        scale = 1.0 if attempt < DISPLACEMENT_ATTEMPTS // 2 else float(rng.uniform(0.3, 0.8))
        new_width, new_height = max(1, round(width * scale)), max(1, round(height * scale))
        left = int(rng.integers(0, GRID_SIZE - new_width + 1))
        top = int(rng.integers(0, GRID_SIZE - new_height + 1))
        candidate = [left, top, left + new_width, top + new_height]
        if box_iou(box, candidate) < max_iou:
            return candidate
    while True:
        left, right = sorted(int(value) for value in rng.integers(0, GRID_SIZE + 1, size=2))
        top, bottom = sorted(int(value) for value in rng.integers(0, GRID_SIZE + 1, size=2))
        candidate = [left, top, right, bottom]
        if right > left and bottom > top and box_iou(box, candidate) < max_iou:
            return candidate


def corrupt_pseudo_gt(
    frame: pl.DataFrame, settings: CorruptionSettings
) -> tuple[pl.DataFrame, CorruptionStats]:
    """Corrupt ``settings.fraction`` of all pseudo-GT boxes of a `spatialcore_train` frame.

    Rows are handled in `question_id` order, so the same frame and seed give the same result.

    Args:
        frame (`pl.DataFrame`): rows with `question_id` and `pseudo_gt`.
        settings (`CorruptionSettings`): fraction, seed, IoU bound, modes.

    Returns:
        `tuple[pl.DataFrame, CorruptionStats]`: the frame with corrupted `pseudo_gt`, and the counts.

    Example:
        >>> items = [{"bbox_2d": [0, 0, 100, 100], "label": "cup", "validity": 0.9},
        ...          {"bbox_2d": [500, 500, 700, 700], "label": "dog", "validity": 0.8}]
        >>> frame = pl.DataFrame({"question_id": ["q"], "pseudo_gt": [items]})
        >>> corrupted, stats = corrupt_pseudo_gt(frame, CorruptionSettings(fraction=1.0, modes=["relabel"]))
        >>> [item["label"] for item in corrupted["pseudo_gt"][0]], stats.by_mode
        (['dog', 'cup'], {'relabel': 2})
    """
    rng = np.random.default_rng(settings.seed)
    ordered = frame.with_row_index("_position").sort("question_id")
    rows = ordered["pseudo_gt"].to_list()
    locations = [(row, index) for row, items in enumerate(rows) for index in range(len(items or []))]
    stats = CorruptionStats(boxes=len(locations))
    count = round(settings.fraction * len(locations))
    chosen = sorted(rng.choice(len(locations), size=count, replace=False).tolist()) if count else []
    stats.chosen = len(chosen)
    actions: dict[tuple[int, int], str] = {}
    for position in chosen:
        row, index = locations[position]
        labels = {item["label"] for item in rows[row]}
        modes = [mode for mode in settings.modes if mode != "relabel" or len(labels) > 1]
        if not modes:
            modes = [mode for mode in MODES if mode != "relabel"]
        actions[(row, index)] = modes[int(rng.integers(0, len(modes)))]
    counts: Counter[str] = Counter()
    corrupted_rows = []
    for row, items in enumerate(rows):
        original = [dict(item) for item in items or []]
        new_items = []
        for index, item in enumerate(original):
            action = actions.get((row, index))
            if action is None:
                new_items.append(item)
                continue
            counts[action] += 1
            if action == "remove":
                continue
            if action == "relabel":
                others = sorted({other["label"] for other in original if other["label"] != item["label"]})
                item = {**item, "label": others[int(rng.integers(0, len(others)))]}
            else:
                item = {**item, "bbox_2d": displace_box(item["bbox_2d"], rng, settings.max_iou)}
            new_items.append(item)
        corrupted_rows.append(new_items)
    stats.by_mode = dict(counts)
    result = (
        ordered.with_columns(pl.Series("pseudo_gt", corrupted_rows, dtype=frame.schema["pseudo_gt"]))
        .sort("_position")
        .drop("_position")
    )
    logger.info("corrupted %d of %d pseudo-GT boxes: %s", stats.chosen, stats.boxes, stats.by_mode)
    return result, stats
