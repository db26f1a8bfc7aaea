"""The settings of DGE question generation: which questions are emitted and the margins that keep them clear.

Every knob is written once, here; the ``dge_tasks`` asset's run configuration *is a*
:class:`TaskSettings` (see :class:`assets.dge.assets.DgeTasksAssetConfig`), and single-image mode
builds one with its own task types.

>>> settings = TaskSettings()
>>> settings.distance_margin_m, settings.max_tasks_per_type, len(settings.task_types)
(0.15, 4, 16)
>>> try:
...     TaskSettings(task_types=["object_colour"])
... except ValueError as error:
...     print("unknown DGE task types ['object_colour']" in str(error))
True
"""

from __future__ import annotations

from typing import Any

import pydantic
from pydantic import ConfigDict, Field, field_validator

from data_contracts.dge_tasks import TASK_TYPES

STRUCTURE_LABELS = (
    "wall",
    "floor",
    "ceiling",
    "object",
    "otherstructure",
    "otherfurniture",
    "otherprop",
    "unknown",
)
"""Labels of room structure and catch-all classes, never asked about."""


class TaskSettings(pydantic.BaseModel):
    """Which questions are emitted, and the margins that keep them unambiguous."""

    model_config = ConfigDict(frozen=True)

    task_types: list[str] = Field(
        default_factory=lambda: list(TASK_TYPES), description="Task types to generate (default: all 16)."
    )
    max_tasks_per_type: int = Field(default=4, description="Most questions of one task type per scene.")
    max_images: int = Field(default=4, description="Most frames shown by one question.")
    min_visibility: float = Field(
        default=0.5,
        description="Least unoccluded share for an object to be named in a frame (see also min_in_frame).",
    )
    min_in_frame: float = Field(
        default=0.5, description="Least share of an object inside the image for it to be named in a frame."
    )
    distance_margin_m: float = Field(
        default=0.15,
        description="Least gap between the closest and second-closest compared distances when the geometry "
        "has no per-object uncertainty (see also distance_margin_relative and margin_sigmas).",
    )
    distance_margin_relative: float = Field(
        default=0.1, description="Least gap between compared distances, as a share of the closest."
    )
    depth_margin_m: float = Field(
        default=0.15,
        description="Least gap between compared depths when the geometry has no per-object uncertainty.",
    )
    direction_margin_deg: float = Field(
        default=15.0,
        description="Least angle to the boundary between two direction answers when it cannot be derived from "
        "object uncertainty (camera-to-camera directions always use it).",
    )
    image_direction_margin_deg: float = Field(
        default=5.0,
        description="Least gap between the horizontal viewing angles of two objects for left/right in an image.",
    )
    min_direction_distance_m: float = Field(
        default=0.5, description="Least length of the reference distances of direction questions."
    )
    elevation_margin_m: float = Field(default=0.15, description="Least height difference of two cameras.")
    visibility_margin: float = Field(default=0.2, description="Least gap between compared visible shares.")
    region_margin: float = Field(
        default=0.04,
        description="Least distance (share of the image side) of an object's centre from the lines between "
        "image regions.",
    )
    turn_min_deg: float = Field(
        default=25.0, description="A turn rotates at least this much (see turn_max_translation_m)."
    )
    turn_max_translation_m: float = Field(default=0.3, description="A turn moves at most this far.")
    move_min_translation_m: float = Field(
        default=0.4, description="A move goes at least this far (see move_max_turn_deg)."
    )
    move_max_turn_deg: float = Field(default=15.0, description="A move turns at most this much.")
    false_turn_max_deg: float = Field(
        default=5.0,
        description="A 'turned left/right' distractor is offered only when the camera turned less than this "
        "that way.",
    )
    false_move_max_m: float = Field(
        default=0.1,
        description="A 'moved forward/backward/left/right' distractor is offered only when the camera went "
        "less than this along that axis of image 1.",
    )
    max_answer_share: float = Field(
        default=0.5,
        description="Most share of a scene's questions of one type with the same answer value (option or count); "
        "when no other value is clear the type gives fewer questions. Measured numbers are not limited.",
    )
    candidate_pool_factor: int = Field(
        default=25,
        description="Clear candidates collected per task type and scene, as a multiple of max_tasks_per_type, "
        "before questions are picked with answer values balanced.",
    )
    min_observed_views: int = Field(
        default=2,
        description="Size questions only about objects seen in at least this many frames (when the geometry "
        "carries observed_views).",
    )
    min_extent_coverage: float = Field(
        default=0.8,
        description="Size questions only about objects whose extent the frames cover at least this much (when "
        "the geometry carries extent_coverage).",
    )
    max_size_uncertainty_relative: float = Field(
        default=0.05,
        description="Size questions only when the size's standard deviation is at most this share of it (when "
        "the geometry carries size_uncertainty_m).",
    )
    max_position_uncertainty_m: float = Field(
        default=0.1,
        description="Distance and position questions only about objects whose centroid's standard deviation is "
        "at most this (when the geometry carries position_uncertainty_m).",
    )
    margin_sigmas: float = Field(
        default=3.0,
        description="With per-object uncertainty, a comparison's margin is this many combined standard "
        "deviations (never below the floors distance_margin_floor_m and direction_margin_floor_deg).",
    )
    distance_margin_floor_m: float = Field(
        default=0.05, description="Least distance or depth margin when it is derived from object uncertainty."
    )
    direction_margin_floor_deg: float = Field(
        default=5.0, description="Least direction margin when it is derived from object uncertainty."
    )
    excluded_labels: list[str] = Field(
        default_factory=lambda: list(STRUCTURE_LABELS),
        description="Labels never asked about (room structure, catch-all classes).",
    )
    candidate_draws: int = Field(default=400, description="Random candidates drawn per task type and scene.")
    min_room_rectangularity: float = Field(
        default=0.95,
        description="Room-size questions only for rooms whose footprint fills this share of its minimum-area "
        "rectangle.",
    )
    motion_window: int = Field(
        default=3,
        description="Camera motion compares frames at most this many positions apart in the frame sequence.",
    )
    test_fraction: float = Field(default=0.1, description="Share of scenes in the test split.")
    image_max_side: int = Field(
        default=0, description="Re-encode images larger than this (JPEG); 0 keeps the files."
    )
    seed: int = Field(default=0, description="Seed of the per-scene question sampling.")

    @field_validator("task_types", mode="before")
    @classmethod
    def _known_task_types(cls, value: Any) -> Any:
        unknown = sorted(set(value) - set(TASK_TYPES))
        if unknown:
            raise ValueError(f"unknown DGE task types {unknown}; valid: {', '.join(TASK_TYPES)}")
        return value
