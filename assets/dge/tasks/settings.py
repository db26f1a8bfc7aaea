"""The settings of DGE question generation: which questions are emitted and the margins that keep them clear.

Every knob is written once, here; the ``dge_tasks`` asset's run configuration *is a*
:class:`TaskSettings` (see :class:`assets.dge.assets.DgeTasksAssetConfig`): its fields, while the
margins and thresholds are class constants, not run configuration. Single-image mode builds one with
its own task types.

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

from typing import Any, ClassVar

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
    """Which questions are emitted, and the margins that keep them unambiguous.

    The fields are the run configuration of ``dge_tasks`` (task types, sizes, labels, split, seed). The
    ``ClassVar`` attributes are the method's constants (visibility thresholds, comparison margins, camera
    motion thresholds, confidence gates, balance and sampling effort): not run configuration, read the same
    way (``settings.distance_margin_m``), and each row's ``facts`` records the ones that decided it by name.
    A test that needs other values passes an instance of a subclass that overrides them.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    task_types: list[str] = Field(
        default_factory=lambda: list(TASK_TYPES), description="Task types to generate (default: all 16)."
    )
    max_tasks_per_type: int = Field(default=4, description="Most questions of one task type per scene.")
    max_images: int = Field(default=4, description="Most frames shown by one question.")
    excluded_labels: list[str] = Field(
        default_factory=lambda: list(STRUCTURE_LABELS),
        description="Labels never asked about (room structure, catch-all classes).",
    )
    test_fraction: float = Field(default=0.1, description="Share of scenes in the test split.")
    image_max_side: int = Field(
        default=0, description="Re-encode images larger than this (JPEG); 0 keeps the files."
    )
    seed: int = Field(default=0, description="Seed of the per-scene question sampling.")

    # Constants of the method (not run configuration; a test may override them in a subclass).
    min_visibility: ClassVar[float] = 0.5
    """Least unoccluded share for an object to be named in a frame (see also min_in_frame)."""
    min_in_frame: ClassVar[float] = 0.5
    """Least share of an object inside the image for it to be named in a frame."""
    distance_margin_m: ClassVar[float] = 0.15
    """Least gap between the closest and second-closest compared distances when the geometry has no per-object
    uncertainty (see also distance_margin_relative and margin_sigmas)."""
    distance_margin_relative: ClassVar[float] = 0.1
    """Least gap between compared distances, as a share of the closest."""
    depth_margin_m: ClassVar[float] = 0.15
    """Least gap between compared depths when the geometry has no per-object uncertainty."""
    direction_margin_deg: ClassVar[float] = 15.0
    """Least angle to the boundary between two direction answers when it cannot be derived from object
    uncertainty (camera-to-camera directions always use it)."""
    image_direction_margin_deg: ClassVar[float] = 5.0
    """Least gap between the horizontal viewing angles of two objects for left/right in an image."""
    min_direction_distance_m: ClassVar[float] = 0.5
    """Least length of the reference distances of direction questions."""
    elevation_margin_m: ClassVar[float] = 0.15
    """Least height difference of two cameras."""
    visibility_margin: ClassVar[float] = 0.2
    """Least gap between compared visible shares."""
    region_margin: ClassVar[float] = 0.04
    """Least distance (share of the image side) of an object's centre from the lines between image regions."""
    turn_min_deg: ClassVar[float] = 25.0
    """A turn rotates at least this much (see turn_max_translation_m)."""
    turn_max_translation_m: ClassVar[float] = 0.3
    """A turn moves at most this far."""
    move_min_translation_m: ClassVar[float] = 0.4
    """A move goes at least this far (see move_max_turn_deg)."""
    move_max_turn_deg: ClassVar[float] = 15.0
    """A move turns at most this much."""
    turn_max_deg: ClassVar[float] = 150.0
    """A turn rotates at most this much: two views whose headings differ by nearly a half turn could come from a
    turn either way (the pair of images does not show which way the camera went, and pose noise decides the sign
    of the angle), so they are not asked about and no turn is offered as a distractor."""
    false_turn_max_deg: ClassVar[float] = 5.0
    """A 'turned left/right' distractor is offered only when the camera turned less than this that way (and the
    headings differ by at most turn_max_deg)."""
    false_move_max_m: ClassVar[float] = 0.1
    """A 'moved forward/backward/left/right' distractor is offered only when the camera went less than this
    along that axis of image 1."""
    max_answer_share: ClassVar[float] = 0.5
    """Most share of a scene's questions of one type with the same answer value (option or count); when no
    other value is clear the type gives fewer questions. Measured numbers are not limited."""
    candidate_pool_factor: ClassVar[int] = 25
    """Clear candidates collected per task type and scene, as a multiple of max_tasks_per_type, before
    questions are picked with answer values balanced."""
    min_observed_views: ClassVar[int] = 2
    """Size questions only about objects seen in at least this many frames (when the geometry carries
    observed_views)."""
    min_extent_coverage: ClassVar[float] = 0.8
    """Size questions only about objects whose extent the frames cover at least this much (when the geometry
    carries extent_coverage)."""
    max_size_uncertainty_relative: ClassVar[float] = 0.05
    """Size questions only when the size's standard deviation is at most this share of it (when the geometry
    carries size_uncertainty_m)."""
    max_position_uncertainty_m: ClassVar[float] = 0.1
    """Measured distances (camera to object, object to object) only about objects whose centroid's standard
    deviation is at most this (when the geometry carries position_uncertainty_m)."""
    max_comparison_position_uncertainty_m: ClassVar[float] = 0.5
    """Comparisons (closest object, depth order, directions seen from above) only about objects whose centroid's
    standard deviation is at most this; their margin is margin_sigmas combined deviations on top."""
    margin_sigmas: ClassVar[float] = 3.0
    """With per-object uncertainty, a comparison's margin is this many combined standard deviations (never
    below the floors distance_margin_floor_m and direction_margin_floor_deg)."""
    distance_margin_floor_m: ClassVar[float] = 0.05
    """Least distance or depth margin when it is derived from object uncertainty."""
    direction_margin_floor_deg: ClassVar[float] = 5.0
    """Least direction margin when it is derived from object uncertainty."""
    candidate_draws: ClassVar[int] = 400
    """Random candidates drawn per task type and scene."""
    min_room_rectangularity: ClassVar[float] = 0.95
    """Room-size questions only for rooms whose footprint fills this share of its minimum-area rectangle."""
    motion_window: ClassVar[int] = 3
    """Camera motion compares frames at most this many positions apart in the frame sequence."""

    @field_validator("task_types", mode="before")
    @classmethod
    def _known_task_types(cls, value: Any) -> Any:
        unknown = sorted(set(value) - set(TASK_TYPES))
        if unknown:
            raise ValueError(f"unknown DGE task types {unknown}; valid: {', '.join(TASK_TYPES)}")
        return value
