"""Two views compared: where the second camera is, whether it is higher, how it moved, which view shows more.

- ``camera_camera_position``: camera 2 in front of, behind, left or right of camera 1 (its heading);
- ``camera_camera_elevation``: camera 2 higher or lower than camera 1;
- ``camera_motion``: between nearby frames, moved forward/backward/left/right or turned left/right;
  a turn is at most ``turn_max_deg`` (near a half turn the way the camera went is not in the images);
  every offered distractor is clearly false (a turn that way under ``false_turn_max_deg`` with the
  headings at most ``turn_max_deg`` apart, a move along that axis under ``false_move_max_m``);
- ``visibility_comparison``: the image that shows a larger visible share of an object.

>>> motion_of(turn_deg=-90.0, offset=np.zeros(2), heading=np.array([0.0, 1.0]), settings=TaskSettings())
('turned right', True)
>>> false_motions(-90.0, np.zeros(2), np.array([0.0, 1.0]), TaskSettings())
['moved forward', 'moved backward', 'moved left', 'moved right', 'turned left']
>>> motion_of(turn_deg=175.0, offset=np.zeros(2), heading=np.array([0.0, 1.0]), settings=TaskSettings())
(None, False)
>>> false_motions(175.0, np.zeros(2), np.array([0.0, 1.0]), TaskSettings())
['moved forward', 'moved backward', 'moved left', 'moved right']
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np

from assets.dge.tasks.angles import DIRECTIONS_4, direction_of, signed_angle_deg
from assets.dge.tasks.answers import (
    NOT_VISIBLE,
    Evaluation,
    Spec,
    all_visible,
    camera_of,
    choice,
    first_failure,
    object_name,
)
from assets.dge.tasks.balance import ANSWER_AND_THREE_DISTRACTORS, SHUFFLED
from assets.dge.tasks.facts import CameraFact, SceneFacts
from assets.dge.tasks.sampling import CandidatePool, draw_frame_pairs
from assets.dge.tasks.settings import TaskSettings
from assets.dge.tasks.task_type import TaskType

MOTIONS = ["moved forward", "moved backward", "moved left", "moved right", "turned left", "turned right"]
NO_HEADING = "camera looks straight up or down"
HALF_TURN = "the headings differ by nearly a half turn (the camera may have turned either way)"
MOVES_BY_DIRECTION = {
    "in front": "moved forward",
    "behind": "moved backward",
    "to the left": "moved left",
    "to the right": "moved right",
}


def camera_pair(facts: SceneFacts, spec: Mapping[str, Any]) -> tuple[CameraFact, CameraFact]:
    """The cameras of the spec's two frames (raises ``SpecError`` for unknown frames)."""
    first, second = (camera_of(facts, f) for f in spec["frames"])
    return first, second


def sample_camera_pair(pool: CandidatePool) -> Iterator[Spec]:
    """Two different random frames."""
    for frames in draw_frame_pairs(pool):
        yield {"frames": frames}


def sample_camera_motion(pool: CandidatePool) -> Iterator[Spec]:
    """A random frame and one at most ``motion_window`` positions before or after it (the balance rule picks the options)."""
    frames, rng = pool.frames, pool.rng
    for _ in range(pool.draws if len(frames) >= 2 else 0):
        first = int(rng.integers(len(frames)))
        step = int(rng.integers(1, pool.settings.motion_window + 1)) * (1 if rng.uniform() < 0.5 else -1)
        second = int(np.clip(first + step, 0, len(frames) - 1))
        if second == first:
            continue
        yield {"frames": [frames[first], frames[second]]}


def sample_visibility_comparison(pool: CandidatePool) -> Iterator[Spec]:
    """A random visible object, a frame that shows it and another frame, in random order."""
    for _ in range(pool.draws if pool.visible and len(pool.frames) >= 2 else 0):
        object_id = pool.pick(pool.visible)
        showing = pool.pick(pool.showing[object_id])
        other = pool.pick([f for f in pool.frames if f != showing])
        yield {
            "object_id": object_id,
            "frames": [showing, other] if pool.rng.uniform() < 0.5 else [other, showing],
        }


def evaluate_camera_camera_position(spec: Spec, facts: SceneFacts, settings: TaskSettings) -> Evaluation:
    """Direction of camera 2's centre from camera 1, relative to camera 1's heading."""
    first, second = camera_pair(facts, spec)
    heading = first.heading
    if heading is None:
        return choice(spec["frames"], DIRECTIONS_4, None, {}, False, NO_HEADING)
    offset = (second.position - first.position)[:2]
    angle = signed_angle_deg(heading, offset)
    label, boundary = direction_of(angle)
    reason = first_failure(
        (float(np.linalg.norm(offset)) >= settings.min_direction_distance_m, "cameras too close together"),
        (boundary >= settings.direction_margin_deg, "direction within the margin of a boundary"),
    )
    return choice(
        spec["frames"],
        DIRECTIONS_4,
        label,
        {"angle_deg": angle, "distance_m": float(np.linalg.norm(offset)), "boundary_margin_deg": boundary},
        not reason,
        reason,
    )


def evaluate_camera_camera_elevation(spec: Spec, facts: SceneFacts, settings: TaskSettings) -> Evaluation:
    """Higher or lower; clear when the heights differ by the elevation margin."""
    first, second = camera_pair(facts, spec)
    rise = float(second.position[2] - first.position[2])
    reason = first_failure((abs(rise) >= settings.elevation_margin_m, "heights within the margin"))
    return choice(
        spec["frames"],
        ["higher", "lower"],
        "higher" if rise > 0 else "lower",
        {"height_change_m": rise},
        not reason,
        reason,
    )


def motion_of(
    turn_deg: float, offset: np.ndarray, heading: np.ndarray, settings: TaskSettings
) -> tuple[str | None, bool]:
    """The motion between two views (a turn in place or a move without turning) and whether it is clear.

    ``offset`` is the horizontal move and ``heading`` the first view's heading; None when the
    motion is neither a clear turn nor a clear move.
    """
    distance = float(np.linalg.norm(offset))
    if abs(turn_deg) > settings.turn_max_deg:
        return None, False
    if abs(turn_deg) >= settings.turn_min_deg and distance <= settings.turn_max_translation_m:
        return ("turned left" if turn_deg > 0 else "turned right"), True
    if distance >= settings.move_min_translation_m and abs(turn_deg) <= settings.move_max_turn_deg:
        direction, boundary = direction_of(signed_angle_deg(heading, offset))
        return MOVES_BY_DIRECTION[direction], boundary >= settings.direction_margin_deg
    return None, False


def motion_amounts(turn_deg: float, offset: np.ndarray, heading: np.ndarray) -> dict[str, float]:
    """How far each motion statement holds: degrees turned that way, metres moved along that axis of view 1."""
    left = np.array([-heading[1], heading[0]])
    ahead, aside = float(offset @ heading), float(offset @ left)
    return {
        "moved forward": ahead,
        "moved backward": -ahead,
        "moved left": aside,
        "moved right": -aside,
        "turned left": turn_deg,
        "turned right": -turn_deg,
    }


def false_motions(
    turn_deg: float, offset: np.ndarray, heading: np.ndarray, settings: TaskSettings
) -> list[str]:
    """The motion statements that are clearly false (so they can be offered as distractors), in ``MOTIONS`` order.

    A turn is clearly false only when the camera turned less than ``false_turn_max_deg`` that way and the headings
    are at most ``turn_max_deg`` apart: near a half turn the camera may have gone either way.
    """
    amounts = motion_amounts(turn_deg, offset, heading)
    bounded_turn = abs(turn_deg) <= settings.turn_max_deg
    return [
        motion
        for motion in MOTIONS
        if (
            amounts[motion] < settings.false_turn_max_deg and bounded_turn
            if motion.startswith("turned")
            else amounts[motion] < settings.false_move_max_m
        )
    ]


def evaluate_camera_motion(spec: Spec, facts: SceneFacts, settings: TaskSettings) -> Evaluation:
    """How the camera moved from image 1 to image 2; every other offered statement must be clearly false."""
    first, second = camera_pair(facts, spec)
    heading_1, heading_2 = first.heading, second.heading
    options = list(spec.get("options", MOTIONS))
    if heading_1 is None or heading_2 is None:
        return choice(spec["frames"], options, None, {}, False, NO_HEADING)
    turn = signed_angle_deg(heading_1, heading_2)
    offset = (second.position - first.position)[:2]
    label, clear = motion_of(turn, offset, heading_1, settings)
    false = false_motions(turn, offset, heading_1, settings)
    if (
        "options" not in spec
    ):  # candidate: the answer and every clearly false statement; the balance rule picks
        options = [motion for motion in MOTIONS if motion == label or motion in false]
    distractors = [option for option in options if option != label]
    reason = first_failure(
        (abs(turn) <= settings.turn_max_deg, HALF_TURN),
        (label is not None and clear, "neither a clear turn nor a clear move"),
        (
            bool(distractors) and all(option in false for option in distractors),
            "a distractor is not clearly false",
        ),
    )
    return choice(
        spec["frames"],
        options,
        label,
        {
            "turn_deg": turn,
            "translation_m": float(np.linalg.norm(offset)),
            "amounts": motion_amounts(turn, offset, heading_1),
            "false_options": false,
        },
        not reason,
        reason,
    )


def evaluate_visibility_comparison(spec: Spec, facts: SceneFacts, settings: TaskSettings) -> Evaluation:
    """The image showing the larger visible share; clear when the shares differ by the visibility margin."""
    object_id = spec["object_id"]
    object_name(facts, object_id)  # the object must exist
    shares = []
    for frame in spec["frames"]:
        camera_of(facts, frame)  # and so must the frames
        seen = facts.seen_in(frame, object_id)
        shares.append(seen.visible_fraction if seen is not None else 0.0)
    gap = abs(shares[0] - shares[1])
    reason = first_failure(
        (all_visible(facts, spec["frames"], [object_id], settings), NOT_VISIBLE),
        (gap >= settings.visibility_margin, "visible shares within the margin"),
    )
    return choice(
        spec["frames"],
        ["image 1", "image 2"],
        "image 1" if shares[0] > shares[1] else "image 2",
        {"object_id": object_id, "visible_fractions": shares, "gap": gap},
        not reason,
        reason,
    )


def camera_camera_position_wording(spec: Mapping[str, Any], facts: SceneFacts) -> str:
    """Camera 2 relative to camera 1."""
    return (
        "Seen from above and facing the way the camera of image 1 looks, where was the camera that took "
        "image 2: in front, behind, to the left or to the right?"
    )


def camera_camera_elevation_wording(spec: Mapping[str, Any], facts: SceneFacts) -> str:
    """Camera 2 higher or lower."""
    return "Was image 2 taken from a higher or a lower position than image 1?"


def camera_motion_wording(spec: Mapping[str, Any], facts: SceneFacts) -> str:
    """How the camera moved."""
    return (
        "How did the camera move between image 1 and image 2? 'Moved' means it went that way (forward, backward, "
        "left or right of where image 1 looks); 'turned' means it rotated in place."
    )


def visibility_comparison_wording(spec: Mapping[str, Any], facts: SceneFacts) -> str:
    """Which image shows more of <A>."""
    name = object_name(facts, spec["object_id"])
    return f"In which image is a larger part of the {name} visible (not hidden by other objects and inside the image)?"


VIEW_TASK_TYPES = (
    TaskType(
        "camera_camera_position",
        sample_camera_pair,
        evaluate_camera_camera_position,
        camera_camera_position_wording,
        SHUFFLED,
        margins=("direction_margin_deg", "min_direction_distance_m"),
        needs_up=True,
    ),
    TaskType(
        "camera_camera_elevation",
        sample_camera_pair,
        evaluate_camera_camera_elevation,
        camera_camera_elevation_wording,
        SHUFFLED,
        margins=("elevation_margin_m",),
        needs_up=True,
    ),
    TaskType(
        "camera_motion",
        sample_camera_motion,
        evaluate_camera_motion,
        camera_motion_wording,
        ANSWER_AND_THREE_DISTRACTORS,
        margins=(
            "turn_min_deg",
            "turn_max_deg",
            "turn_max_translation_m",
            "move_min_translation_m",
            "move_max_turn_deg",
            "false_turn_max_deg",
            "false_move_max_m",
        ),
        needs_up=True,
    ),
    TaskType(
        "visibility_comparison",
        sample_visibility_comparison,
        evaluate_visibility_comparison,
        visibility_comparison_wording,
        SHUFFLED,
        margins=("visibility_margin",),
    ),
)
"""The task types that compare two views."""
