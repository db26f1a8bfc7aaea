"""Exact question-answer rows for the 16 DGE task types, computed from a scene's geometry.

A question is described by a small JSON-able *spec* (the task type's object ids, frame indices and
options). Every task type is one :class:`~assets.dge.tasks.task_type.TaskType` entry of
:data:`~assets.dge.tasks.registry.REGISTRY`: its *sampler* draws candidate specs from a scene, its
*evaluator* computes the exact answer from :class:`SceneFacts` (objects, cameras, per-frame
visibility, room) and says whether it is clear under the geometry's own uncertainty (two
distances within the margin, an object barely visible...), its *wording* is the question text, and
its *balance rule* settles which options are offered and in which order. Unclear questions are not
emitted. Because the answer is a function of the spec and the facts alone, the same spec can be
re-evaluated on other facts, e.g. a synthetic world's exact truth, to audit every emitted answer.

Conventions (gravity-aligned frame: metres, ``z`` up; OpenCV cameras): an object's position is its
centroid (the centre of its oriented box); "left" and "right" are seen from above with ``z`` up; a
camera's heading is its viewing direction projected onto the floor; depth is the camera-frame
``z`` of the centroid. Numeric answers have a precision the question states: metres to 2 decimals,
centimetres to integers from 10 cm up and to 1 decimal below, square metres to 1 decimal, counts to
integers. Objects measured too poorly for a question are not asked about, and comparison margins
follow the objects' measured uncertainty when the geometry carries it (see
:mod:`~assets.dge.tasks.answers`); :class:`GenerationReport` counts what was withheld and why.

| task type | module | question | answer |
|---|---|---|---|
| ``object_count`` | counting | how many <label>s are in the room (frames show them all) | count |
| ``object_size`` | measurement | longest dimension of <object> | cm |
| ``attribute_measurement`` | measurement | height, length or width of <A> | cm |
| ``room_size`` | measurement | floor area of a rectangular room | m^2 |
| ``camera_object_distance`` | distance | camera centre to <object>'s centre | m |
| ``absolute_distance`` | distance | centre of <A> to centre of <B> | m |
| ``relative_distance`` | distance | which of 2-4 objects is closest to <A> | choice |
| ``depth_order`` | distance | which of two objects has the smaller depth (along the view axis) | choice |
| ``relative_direction_scene`` | direction | standing at <A> facing <B>: quadrant of <C> | choice of 4 |
| ``relative_direction_image`` | direction | is <A> left or right of <B> in this image | choice of 2 |
| ``camera_object_position`` | direction | <A> (seen in image 1) relative to camera 2 | choice of 4 |
| ``camera_region_position`` | direction | cell of a 3x3 grid holding the centre of <A>'s visible 2D box | choice of 4 |
| ``camera_camera_position`` | views | camera 2 relative to camera 1 (front/behind/left/right) | choice of 4 |
| ``camera_camera_elevation`` | views | camera 2 higher or lower than camera 1 | choice of 2 |
| ``camera_motion`` | views | moved forward/backward/left/right or turned left/right | choice of 2-4 (false distractors) |
| ``visibility_comparison`` | views | in which image is more of <A> visible | choice of 2 |

The other modules: :mod:`~assets.dge.tasks.settings` (:class:`TaskSettings`, every knob once),
:mod:`~assets.dge.tasks.facts`, :mod:`~assets.dge.tasks.answers`, :mod:`~assets.dge.tasks.angles`,
:mod:`~assets.dge.tasks.sampling`, :mod:`~assets.dge.tasks.balance`,
:mod:`~assets.dge.tasks.generation` and :mod:`~assets.dge.tasks.rows` (the table).

>>> settings = TaskSettings()
>>> settings.distance_margin_m, settings.max_tasks_per_type
(0.15, 4)
>>> sorted(REGISTRY) == sorted(TASK_TYPES)
True
"""

from assets.dge.tasks.answers import Evaluation, SpecError, TaskAnswer, format_number
from assets.dge.tasks.balance import BalanceRule, shuffled_options
from assets.dge.tasks.facts import (
    CameraFact,
    ObjectFact,
    SceneFacts,
    SeenFact,
    horizontal_heading,
    room_answer,
    room_area,
    scene_facts_from_tables,
)
from assets.dge.tasks.generation import GeneratedTask, GenerationReport, generate_tasks, task_id_for
from assets.dge.tasks.registry import REGISTRY, evaluate_spec
from assets.dge.tasks.rows import build_scene_tasks, tasks_to_frame
from assets.dge.tasks.sampling import CandidatePool, cover_frames, frames_showing, nameable_objects
from assets.dge.tasks.settings import STRUCTURE_LABELS, TaskSettings
from assets.dge.tasks.task_type import TaskType
from data_contracts.dge_tasks import TASK_TYPES

__all__ = [
    "REGISTRY",
    "STRUCTURE_LABELS",
    "TASK_TYPES",
    "BalanceRule",
    "CameraFact",
    "CandidatePool",
    "Evaluation",
    "GeneratedTask",
    "GenerationReport",
    "ObjectFact",
    "SceneFacts",
    "SeenFact",
    "SpecError",
    "TaskAnswer",
    "TaskSettings",
    "TaskType",
    "build_scene_tasks",
    "cover_frames",
    "evaluate_spec",
    "format_number",
    "frames_showing",
    "generate_tasks",
    "horizontal_heading",
    "nameable_objects",
    "room_answer",
    "room_area",
    "scene_facts_from_tables",
    "shuffled_options",
    "task_id_for",
    "tasks_to_frame",
]
