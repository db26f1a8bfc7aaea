"""Multiple-choice questions computed from the 3D truth of one view.

Each template is a function `(facts, rng, option_count) -> Draft | None` that picks objects the view
shows clearly (`ViewFacts.nameable`), computes the answer from the scene's geometry, and returns the
correct option with distractors; it returns None when the view offers no unambiguous instance
(every comparison keeps a margin, so the gold answer is clear-cut). The templates are grouped into
OmniSpatial's task types and sub-task types and into SpatiaLab's categories; `ask` turns a draft
into options and a gold index.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import numpy as np

from assets.sample_world.facts import ObjectInView, ViewFacts
from data_contracts.nouns import pluralize

logger = logging.getLogger(__name__)

DISTANCE_MARGIN = 0.4
"""Least difference (metres) between the distances an answer compares."""
FLOOR_DISTANCE_MARGIN = 0.3
LATERAL_MARGIN = 0.15
"""Least difference in camera `x / z` between objects compared left/right."""
SIDE_SINE = 0.35
"""Least |sin| of the angle between a heading and an object for a left/right answer."""
MOVE_MARGIN = 0.15
HEIGHT_RATIO = 1.25
VOLUME_RATIO = 2.0
BEHIND_ANGLE = math.radians(12.0)
NOT_BEHIND_ANGLE = math.radians(35.0)
PATH_HALF_WIDTH = 0.2
PATH_CLEAR_WIDTH = 0.5
FACING_TOLERANCE = math.radians(35.0)
CLEAR_VISIBILITY = 0.6
OCCLUDED_RANGE = (0.4, 0.8)
UNOCCLUDED_VISIBILITY = 0.98
NOTHING_IN_THE_WAY = "nothing, the way is clear"
THE_FLOOR = "the floor"
LEFT, RIGHT = "left", "right"


@dataclass(frozen=True)
class Draft:
    """A question before its options are drawn.

    Args:
        template (`str`): the template's name.
        question (`str`): the question text.
        answer (`str`): the correct option.
        distractors (`tuple[str, ...]`): wrong options, all different from the answer.
        object_ids (`tuple[int, ...]`): objects the question names or answers with.
        facts (`dict`): the numbers behind the answer (JSON-serialisable).
        ordered (`bool`): keep the natural order of `order` instead of shuffling.
        order (`tuple[str, ...]`): natural order of options (when `ordered`).
        keep_all (`bool`): the question names its options, so every distractor is kept.
    """

    template: str
    question: str
    answer: str
    distractors: tuple[str, ...]
    object_ids: tuple[int, ...]
    facts: dict = field(default_factory=dict)
    ordered: bool = False
    order: tuple[str, ...] = ()
    keep_all: bool = False


@dataclass(frozen=True)
class Question:
    """A finished multiple-choice question.

    Args:
        task_type (`str`): OmniSpatial task type or SpatiaLab category.
        sub_task_type (`str`): OmniSpatial sub-task type or SpatiaLab sub-category.
        question (`str`): the question text.
        options (`list[str]`): 2 to 4 options.
        answer_index (`int`): 0-based index of the correct option.
        template (`str`), object_ids (`tuple[int, ...]`), facts (`dict`): provenance for the truth file.
    """

    task_type: str
    sub_task_type: str
    question: str
    options: list[str]
    answer_index: int
    template: str
    object_ids: tuple[int, ...]
    facts: dict


Template = Callable[[ViewFacts, np.random.Generator, int], Draft | None]


def _the(item: ObjectInView) -> str:
    return f"the {item.name}"


def _round(value: float, digits: int = 3) -> float:
    return round(float(value), digits)


def _shuffled(items, rng: np.random.Generator) -> list:
    items = list(items)
    return [items[index] for index in rng.permutation(len(items))]


def _extreme_subset(
    items: list[ObjectInView],
    key: Callable[[ObjectInView], float],
    margin: float,
    count: int,
    rng: np.random.Generator,
    largest: bool,
) -> list[ObjectInView]:
    """Up to `count` items (random order) whose extreme `key` beats every other item's by `margin`.

    Answers are tried in random order; the first that leaves `count - 1` clearly beaten items wins,
    otherwise the one that leaves the most (an empty list when none beats any other).
    """
    sign = 1.0 if largest else -1.0
    best: list[ObjectInView] = []
    for answer in _shuffled(items, rng):
        beaten = [item for item in items if item is not answer and sign * (key(answer) - key(item)) >= margin]
        if not beaten:
            continue
        chosen = [answer, *_shuffled(beaten, rng)[: count - 1]]
        if len(chosen) > len(best):
            best = chosen
        if len(chosen) == count:
            break
    return _shuffled(best, rng)


def _extreme_choice(
    template: str,
    question: str,
    items: list[ObjectInView],
    key: Callable[[ObjectInView], float],
    largest: bool,
    fact_name: str,
) -> Draft:
    best = max(items, key=key) if largest else min(items, key=key)
    return Draft(
        template=template,
        question=question,
        answer=best.name,
        distractors=tuple(item.name for item in items if item is not best),
        object_ids=tuple(item.object_id for item in items),
        facts={fact_name: {str(item.object_id): _round(key(item)) for item in items}},
    )


def closest_to_camera(facts: ViewFacts, rng: np.random.Generator, option_count: int) -> Draft | None:
    """Which object is closest to the camera (centroid distance)."""
    items = _extreme_subset(
        list(facts.nameable), lambda item: item.distance, DISTANCE_MARGIN, option_count, rng, False
    )
    if len(items) < 2:
        return None
    if len(items) == 2:
        question = f"Which is closer to the camera: {_the(items[0])} or {_the(items[1])}?"
    else:
        question = "Which of these objects is closest to the camera?"
    return _extreme_choice(
        "closest_to_camera", question, items, lambda item: item.distance, False, "distance_m"
    )


def farthest_from_camera(facts: ViewFacts, rng: np.random.Generator, option_count: int) -> Draft | None:
    """Which object is farthest from the camera (centroid distance)."""
    items = _extreme_subset(
        list(facts.nameable), lambda item: item.distance, DISTANCE_MARGIN, option_count, rng, True
    )
    if len(items) < 2:
        return None
    question = "Which of these objects is farthest from the camera?"
    return _extreme_choice(
        "farthest_from_camera", question, items, lambda item: item.distance, True, "distance_m"
    )


def left_or_right_in_view(facts: ViewFacts, rng: np.random.Generator, option_count: int) -> Draft | None:
    """Is object A left or right of object B in the image (camera x / z of the centroids)."""
    in_front = [item for item in facts.nameable if item.centroid_camera[2] > 0.1]
    for first in _shuffled(in_front, rng):
        for second in _shuffled(in_front, rng):
            if first is second or not abs(first.lateral - second.lateral) >= LATERAL_MARGIN:
                continue
            answer = LEFT if first.lateral < second.lateral else RIGHT
            return Draft(
                template="left_or_right_in_view",
                question=f"From the camera's viewpoint, is {_the(first)} to the left or to the right of {_the(second)}?",
                answer=answer,
                distractors=(RIGHT if answer == LEFT else LEFT,),
                object_ids=(first.object_id, second.object_id),
                facts={
                    "lateral": {
                        str(first.object_id): _round(first.lateral),
                        str(second.object_id): _round(second.lateral),
                    }
                },
            )
    return None


def _side(origin: np.ndarray, heading: np.ndarray, point: np.ndarray) -> tuple[str, float] | None:
    """`left`/`right` of `point` for an observer at `origin` facing `heading` (floor plane), with the sine."""
    offset = point[:2] - origin[:2]
    heading = heading[:2]
    if np.linalg.norm(offset) < 0.5 or np.linalg.norm(heading) < 1e-6:
        return None
    sine = float(
        (heading[0] * offset[1] - heading[1] * offset[0]) / (np.linalg.norm(heading) * np.linalg.norm(offset))
    )
    if abs(sine) < SIDE_SINE:
        return None
    return (LEFT if sine > 0 else RIGHT), sine


def allocentric_left_or_right(facts: ViewFacts, rng: np.random.Generator, option_count: int) -> Draft | None:
    """Standing at object A facing object B, is object C on your left or right."""
    items = _shuffled(facts.nameable, rng)
    for standing in items:
        for facing in items:
            if facing is standing:
                continue
            heading = facing.scene_object.centroid - standing.scene_object.centroid
            if np.linalg.norm(heading[:2]) < 0.5:
                continue
            for third in items:
                if third is standing or third is facing:
                    continue
                side = _side(standing.scene_object.centroid, heading, third.scene_object.centroid)
                if side is None:
                    continue
                answer, sine = side
                return Draft(
                    template="allocentric_left_or_right",
                    question=(
                        f"Imagine you stand at {_the(standing)} and face {_the(facing)}. "
                        f"Is {_the(third)} on your left or on your right?"
                    ),
                    answer=answer,
                    distractors=(RIGHT if answer == LEFT else LEFT,),
                    object_ids=(standing.object_id, facing.object_id, third.object_id),
                    facts={"sine": _round(sine)},
                )
    return None


def facing_camera_left_or_right(
    facts: ViewFacts, rng: np.random.Generator, option_count: int
) -> Draft | None:
    """Standing at object A and facing the camera, is object B on your left or right."""
    items = _shuffled(facts.nameable, rng)
    camera = facts.view.position
    for standing in items:
        heading = camera - standing.scene_object.centroid
        for other in items:
            if other is standing:
                continue
            side = _side(standing.scene_object.centroid, heading, other.scene_object.centroid)
            if side is None:
                continue
            answer, sine = side
            return Draft(
                template="facing_camera_left_or_right",
                question=(
                    f"Imagine you stand at {_the(standing)}, looking towards the camera. "
                    f"Is {_the(other)} on your left or on your right?"
                ),
                answer=answer,
                distractors=(RIGHT if answer == LEFT else LEFT,),
                object_ids=(standing.object_id, other.object_id),
                facts={"sine": _round(sine)},
            )
    return None


def _floor_angle(origin: np.ndarray, first: np.ndarray, second: np.ndarray) -> float:
    first_offset, second_offset = first[:2] - origin[:2], second[:2] - origin[:2]
    cosine = np.dot(first_offset, second_offset) / (
        np.linalg.norm(first_offset) * np.linalg.norm(second_offset)
    )
    return float(math.acos(float(np.clip(cosine, -1.0, 1.0))))


def behind_from_viewpoint(facts: ViewFacts, rng: np.random.Generator, option_count: int) -> Draft | None:
    """From a viewpoint (the camera or an object), which object is behind object A."""
    items = _shuffled(facts.nameable, rng)
    viewpoints: list[tuple[str, np.ndarray, ObjectInView | None]] = [
        ("the camera", facts.view.position, None)
    ]
    viewpoints += [(_the(item), item.scene_object.centroid, item) for item in items]
    for label, origin, viewpoint_object in viewpoints:
        for front in items:
            if front is viewpoint_object:
                continue
            front_distance = float(np.linalg.norm(front.scene_object.centroid[:2] - origin[:2]))
            if front_distance < 0.5:
                continue
            behind, others = [], []
            for item in items:
                if item is front or item is viewpoint_object:
                    continue
                distance = float(np.linalg.norm(item.scene_object.centroid[:2] - origin[:2]))
                if distance < 0.3:
                    continue
                angle = _floor_angle(origin, front.scene_object.centroid, item.scene_object.centroid)
                if angle < BEHIND_ANGLE and distance > front_distance + DISTANCE_MARGIN:
                    behind.append(item)
                elif angle > NOT_BEHIND_ANGLE:
                    others.append(item)
            if len(behind) != 1 or not others:
                continue
            if viewpoint_object is None:
                question = f"Looking from the camera, which object is behind {_the(front)}?"
            else:
                question = f"If you stood at {label} and looked at {_the(front)}, which object would be behind {_the(front)}?"
            ids = [front.object_id, behind[0].object_id] + [
                item.object_id for item in others[: option_count - 1]
            ]
            if viewpoint_object is not None:
                ids.insert(0, viewpoint_object.object_id)
            return Draft(
                template="behind_from_viewpoint",
                question=question,
                answer=behind[0].name,
                distractors=tuple(item.name for item in others[: option_count - 1]),
                object_ids=tuple(ids),
                facts={"viewpoint": [_round(value) for value in origin]},
            )
    return None


def support_surface(facts: ViewFacts, rng: np.random.Generator, option_count: int) -> Draft | None:
    """What is object A resting on (a supporting object or the floor)."""
    items = _shuffled(facts.nameable, rng)
    for item in items:
        support_id = item.scene_object.support_id
        if support_id is None:
            answer = THE_FLOOR
        else:
            if facts.by_id(support_id) not in facts.nameable:
                continue
            answer = _the(facts.by_id(support_id))
        distractors = [THE_FLOOR] if support_id is not None else []
        distractors += [
            _the(other)
            for other in items
            if other is not item and other.object_id != support_id and other.scene_object.support_id is None
        ]
        distractors = distractors[: option_count - 1]
        if not distractors:
            continue
        return Draft(
            template="support_surface",
            question=f"What is {_the(item)} resting on?",
            answer=answer,
            distractors=tuple(distractors),
            object_ids=(item.object_id,) + ((support_id,) if support_id is not None else ()),
            facts={"support_id": support_id},
        )
    return None


def moved_object_distance(facts: ViewFacts, rng: np.random.Generator, option_count: int) -> Draft | None:
    """If object A moves 1 m towards the camera, does it get closer to or farther from object B."""
    items = _shuffled(facts.nameable, rng)
    camera = facts.view.position
    for moving in items:
        start = moving.scene_object.centroid
        direction = camera[:2] - start[:2]
        if np.linalg.norm(direction) < 1.5:
            continue
        end = start[:2] + direction / np.linalg.norm(direction)
        for other in items:
            if other is moving:
                continue
            target = other.scene_object.centroid[:2]
            before, after = float(np.linalg.norm(target - start[:2])), float(np.linalg.norm(target - end))
            if abs(after - before) < MOVE_MARGIN:
                continue
            answer = "closer" if after < before else "farther"
            return Draft(
                template="moved_object_distance",
                question=(
                    f"If {_the(moving)} were moved 1 metre straight towards the camera, would it get closer to "
                    f"or farther from {_the(other)}?"
                ),
                answer=answer,
                distractors=("farther" if answer == "closer" else "closer",),
                object_ids=(moving.object_id, other.object_id),
                facts={"before_m": _round(before), "after_m": _round(after)},
            )
    return None


def camera_forward_closest(facts: ViewFacts, rng: np.random.Generator, option_count: int) -> Draft | None:
    """After the camera moves forward (along the floor), which object is closest to it."""
    forward = facts.view.rotation[:, 2].copy()
    forward[2] = 0.0
    if np.linalg.norm(forward) < 0.3:
        return None
    forward /= np.linalg.norm(forward)
    step = float(rng.choice([1.0, 1.5, 2.0]))
    position = facts.view.position + forward * step
    room = facts.scene.room
    if not (0.2 < position[0] < room.width - 0.2 and 0.2 < position[1] < room.depth - 0.2):
        return None

    def distance(item: ObjectInView) -> float:
        return float(np.linalg.norm(item.scene_object.centroid - position))

    items = _extreme_subset(list(facts.nameable), distance, DISTANCE_MARGIN, option_count, rng, False)
    if len(items) < 2:
        return None
    draft = _extreme_choice(
        "camera_forward_closest",
        f"If the camera moved {step:g} metre{'' if step == 1 else 's'} straight ahead, which of these objects "
        "would be closest to it?",
        items,
        distance,
        False,
        "distance_m",
    )
    return replace(draft, facts={**draft.facts, "step_m": step})


def _path_entry(item: ObjectInView, start: np.ndarray, end: np.ndarray, half_width: float) -> float | None:
    """Fraction along `start -> end` (floor plane) where the segment enters the object's footprint
    grown by `half_width`, or None when it misses it (Liang-Barsky in the object's local frame)."""
    scene_object = item.scene_object
    rotation = scene_object.rotation[:2, :2]
    low = scene_object.local_min[:2] - half_width
    high = scene_object.local_max[:2] + half_width
    local_start = (start - scene_object.position[:2]) @ rotation
    local_end = (end - scene_object.position[:2]) @ rotation
    delta = local_end - local_start
    entry, leave = 0.0, 1.0
    for axis in range(2):
        if abs(delta[axis]) < 1e-12:
            if not low[axis] <= local_start[axis] <= high[axis]:
                return None
            continue
        first = (low[axis] - local_start[axis]) / delta[axis]
        second = (high[axis] - local_start[axis]) / delta[axis]
        entry = max(entry, min(first, second))
        leave = min(leave, max(first, second))
    return entry if entry <= leave else None


def path_blocker(facts: ViewFacts, rng: np.random.Generator, option_count: int) -> Draft | None:
    """Walking straight from the camera to object A, which object is in the way (or none)."""
    items = _shuffled([item for item in facts.nameable if item.scene_object.support_id is None], rng)
    floor_objects = [item for item in facts.objects if item.scene_object.support_id is None]
    start = facts.view.position[:2]
    for target in items:
        end = target.scene_object.centroid[:2]
        target_entry = _path_entry(target, start, end, 0.0)
        if target_entry is None or np.linalg.norm(end - start) < 1.0:
            continue
        end_at_target = start + (end - start) * target_entry
        blockers, near = [], set()
        for item in floor_objects:
            if item is target:
                continue
            entry = _path_entry(item, start, end_at_target, PATH_HALF_WIDTH)
            if entry is not None:
                blockers.append((entry, item))
            if _path_entry(item, start, end_at_target, PATH_CLEAR_WIDTH) is not None:
                near.add(item.object_id)
        blockers.sort(key=lambda pair: pair[0])
        if blockers:
            first = blockers[0][1]
            if first not in facts.nameable:
                continue
            answer = first.name
            distractors = [NOTHING_IN_THE_WAY]
        else:
            if near:
                continue
            answer = NOTHING_IN_THE_WAY
            distractors = []
        distractors += [item.name for item in items if item is not target and item.object_id not in near]
        distractors = distractors[: option_count - 1]
        if not distractors:
            continue
        return Draft(
            template="path_blocker",
            question=f"If you walked in a straight line from the camera to {_the(target)}, what would be in your way?",
            answer=answer,
            distractors=tuple(distractors),
            object_ids=(target.object_id,) + tuple(item.object_id for _, item in blockers[:1]),
            facts={"blockers": [item.object_id for _, item in blockers]},
        )
    return None


def image_region(facts: ViewFacts, rng: np.random.Generator, option_count: int) -> Draft | None:
    """In which third of the image (left, centre, right) is object A (mask centroid)."""
    width = facts.view.width
    for item in _shuffled(facts.nameable, rng):
        u = item.visibility.mask_centroid[0] / width
        if min(abs(u - 1 / 3), abs(u - 2 / 3)) < 0.04:
            continue
        answer = "left" if u < 1 / 3 else "right" if u > 2 / 3 else "centre"
        options = ("left", "centre", "right")
        return Draft(
            template="image_region",
            question=f"In which part of the image is {_the(item)}: the left, the centre or the right?",
            answer=answer,
            distractors=tuple(option for option in options if option != answer),
            object_ids=(item.object_id,),
            facts={"mask_centroid_u": _round(u)},
            ordered=True,
            order=options,
            keep_all=True,
        )
    return None


def closest_to_room_centre(facts: ViewFacts, rng: np.random.Generator, option_count: int) -> Draft | None:
    """Which object stands closest to the centre of the room (floor distance of centroids)."""
    centre = facts.scene.room.centre[:2]

    def distance(item: ObjectInView) -> float:
        return float(np.linalg.norm(item.scene_object.centroid[:2] - centre))

    items = _extreme_subset(list(facts.nameable), distance, FLOOR_DISTANCE_MARGIN, option_count, rng, False)
    if len(items) < 2:
        return None
    return _extreme_choice(
        "closest_to_room_centre",
        "Which of these objects is closest to the centre of the room?",
        items,
        distance,
        False,
        "distance_m",
    )


def nearest_to_object(facts: ViewFacts, rng: np.random.Generator, option_count: int) -> Draft | None:
    """Which object is nearest to object A (floor distance of centroids)."""
    for anchor in _shuffled(facts.nameable, rng):

        def distance(item: ObjectInView, anchor: ObjectInView = anchor) -> float:
            return float(np.linalg.norm(item.scene_object.centroid[:2] - anchor.scene_object.centroid[:2]))

        others = [item for item in facts.nameable if item is not anchor]
        items = _extreme_subset(others, distance, FLOOR_DISTANCE_MARGIN, option_count, rng, False)
        if len(items) < 2:
            continue
        draft = _extreme_choice(
            "nearest_to_object",
            f"Which of these objects is nearest to {_the(anchor)}?",
            items,
            distance,
            False,
            "distance_m",
        )
        return replace(draft, object_ids=(anchor.object_id,) + draft.object_ids)
    return None


def _count_options(
    count: int, option_count: int, rng: np.random.Generator
) -> tuple[str, tuple[str, ...], tuple[str, ...]]:
    low = max(0, count - int(rng.integers(0, option_count)))
    values = [str(value) for value in range(low, low + option_count)]
    return str(count), tuple(value for value in values if value != str(count)), tuple(values)


def _clear_group(facts: ViewFacts, members: list[ObjectInView]) -> list[ObjectInView] | None:
    """The clearly visible members, or None when some member is only partly or barely visible."""
    clear = []
    for item in members:
        visibility = item.visibility
        if visibility.visible_pixels == 0:
            continue
        if item in facts.nameable and visibility.visibility >= CLEAR_VISIBILITY:
            clear.append(item)
        else:
            return None
    return clear


def count_category(facts: ViewFacts, rng: np.random.Generator, option_count: int) -> Draft | None:
    """How many objects of a category are visible."""
    categories = sorted({item.category for item in facts.nameable})
    for category in _shuffled(categories, rng):
        clear = _clear_group(facts, [item for item in facts.objects if item.category == category])
        if not clear:
            continue
        answer, distractors, order = _count_options(len(clear), option_count, rng)
        return Draft(
            template="count_category",
            question=f"How many {pluralize(category)} can you see in the image?",
            answer=answer,
            distractors=distractors,
            object_ids=tuple(item.object_id for item in clear),
            facts={"count": len(clear)},
            ordered=True,
            order=order,
        )
    return None


def count_colour(facts: ViewFacts, rng: np.random.Generator, option_count: int) -> Draft | None:
    """How many objects of a colour are visible."""
    colours = sorted({item.scene_object.colour for item in facts.nameable})
    for colour in _shuffled(colours, rng):
        clear = _clear_group(facts, [item for item in facts.objects if item.scene_object.colour == colour])
        if not clear:
            continue
        answer, distractors, order = _count_options(len(clear), option_count, rng)
        return Draft(
            template="count_colour",
            question=f"How many {colour} objects can you see in the image?",
            answer=answer,
            distractors=distractors,
            object_ids=tuple(item.object_id for item in clear),
            facts={"count": len(clear)},
            ordered=True,
            order=order,
        )
    return None


def taller_object(facts: ViewFacts, rng: np.random.Generator, option_count: int) -> Draft | None:
    """Which of two objects is taller (height of its own box)."""
    items = _shuffled(facts.nameable, rng)
    for first in items:
        for second in items:
            if first is second:
                continue
            first_height, second_height = (
                float(first.scene_object.extents[2]),
                float(second.scene_object.extents[2]),
            )
            if max(first_height, second_height) < HEIGHT_RATIO * min(first_height, second_height):
                continue
            taller, shorter = (first, second) if first_height > second_height else (second, first)
            return Draft(
                template="taller_object",
                question=f"Which object is taller: {_the(first)} or {_the(second)}?",
                answer=taller.name,
                distractors=(shorter.name,),
                object_ids=(first.object_id, second.object_id),
                facts={
                    "height_m": {
                        str(first.object_id): _round(first_height),
                        str(second.object_id): _round(second_height),
                    }
                },
            )
    return None


def bigger_object(facts: ViewFacts, rng: np.random.Generator, option_count: int) -> Draft | None:
    """Which object is the biggest (oriented-box volume, by a factor of `VOLUME_RATIO`)."""

    def log_volume(item: ObjectInView) -> float:
        return math.log(item.scene_object.volume)

    items = _extreme_subset(list(facts.nameable), log_volume, math.log(VOLUME_RATIO), option_count, rng, True)
    if len(items) < 2:
        return None
    question = (
        f"Which is bigger: {_the(items[0])} or {_the(items[1])}?"
        if len(items) == 2
        else "Which of these objects is the biggest?"
    )
    return _extreme_choice(
        "bigger_object", question, items, lambda item: item.scene_object.volume, True, "volume_m3"
    )


def _metre_options(
    value: float, option_count: int, rng: np.random.Generator
) -> tuple[str, tuple[str, ...], tuple[str, ...]] | None:
    answer = round(value, 1)
    candidates = [round(answer * factor, 1) for factor in (0.4, 0.6, 1.5, 2.0, 2.6)]
    distractors: list[float] = []
    for candidate in _shuffled(candidates, rng):
        if candidate > 0 and all(
            abs(candidate - other) >= max(0.2, 0.2 * answer) for other in [answer, *distractors]
        ):
            distractors.append(candidate)
        if len(distractors) == option_count - 1:
            break
    if not distractors:
        return None
    values = sorted([answer, *distractors])
    return (
        f"{answer:.1f} m",
        tuple(f"{value:.1f} m" for value in distractors),
        tuple(f"{value:.1f} m" for value in values),
    )


def distance_between(facts: ViewFacts, rng: np.random.Generator, option_count: int) -> Draft | None:
    """About how far apart are two objects (3D centroid distance)."""
    items = _shuffled(facts.nameable, rng)
    if len(items) < 2:
        return None
    first, second = items[0], items[1]
    distance = float(np.linalg.norm(first.scene_object.centroid - second.scene_object.centroid))
    options = _metre_options(distance, option_count, rng)
    if options is None or distance < 0.3:
        return None
    answer, distractors, order = options
    return Draft(
        template="distance_between",
        question=f"Approximately how far apart are {_the(first)} and {_the(second)} (centre to centre)?",
        answer=answer,
        distractors=distractors,
        object_ids=(first.object_id, second.object_id),
        facts={"distance_m": _round(distance)},
        ordered=True,
        order=order,
    )


def top_height(facts: ViewFacts, rng: np.random.Generator, option_count: int) -> Draft | None:
    """Approximately how high above the floor is the top of object A."""
    for item in _shuffled(facts.nameable, rng):
        height = float(item.scene_object.aabb[1][2])
        if height < 0.3:
            continue
        options = _metre_options(height, option_count, rng)
        if options is None:
            continue
        answer, distractors, order = options
        return Draft(
            template="top_height",
            question=f"Approximately how high above the floor is the top of {_the(item)}?",
            answer=answer,
            distractors=distractors,
            object_ids=(item.object_id,),
            facts={"top_m": _round(height)},
            ordered=True,
            order=order,
        )
    return None


def highest_top(facts: ViewFacts, rng: np.random.Generator, option_count: int) -> Draft | None:
    """Which object reaches highest above the floor."""

    def top(item: ObjectInView) -> float:
        return float(item.scene_object.aabb[1][2])

    items = _extreme_subset(list(facts.nameable), top, 0.15, option_count, rng, True)
    if len(items) < 2:
        return None
    return _extreme_choice(
        "highest_top", "Which of these objects reaches highest above the floor?", items, top, True, "top_m"
    )


def occluded_object(facts: ViewFacts, rng: np.random.Generator, option_count: int) -> Draft | None:
    """Which object is partly hidden behind another one (visibility, not truncation)."""
    low, high = OCCLUDED_RANGE
    hidden = [
        item
        for item in facts.nameable
        if low <= item.visibility.visibility <= high and not item.visibility.truncated
    ]
    whole = [
        item
        for item in facts.nameable
        if item.visibility.visibility >= UNOCCLUDED_VISIBILITY and not item.visibility.truncated
    ]
    if not hidden or not whole:
        return None
    answer = hidden[int(rng.integers(len(hidden)))]
    distractors = _shuffled(whole, rng)[: option_count - 1]
    return Draft(
        template="occluded_object",
        question="Which of these objects is partly hidden behind another object?",
        answer=answer.name,
        distractors=tuple(item.name for item in distractors),
        object_ids=(answer.object_id,) + tuple(item.object_id for item in distractors),
        facts={
            "visibility": {
                str(item.object_id): _round(item.visibility.visibility) for item in [answer, *distractors]
            }
        },
    )


FACING_OPTIONS = ("towards the camera", "away from the camera", "to the left", "to the right")


def facing_direction(facts: ViewFacts, rng: np.random.Generator, option_count: int) -> Draft | None:
    """Which way does object A face, as seen from the camera."""
    for item in _shuffled(facts.nameable, rng):
        facing = item.scene_object.facing
        if facing is None:
            continue
        in_camera = facts.view.rotation.T @ facing
        angle = math.atan2(float(in_camera[0]), float(in_camera[2]))
        directions = {
            "away from the camera": 0.0,
            "to the right": math.pi / 2,
            "to the left": -math.pi / 2,
            "towards the camera": math.pi,
        }
        answer = None
        for label, centre in directions.items():
            difference = abs((angle - centre + math.pi) % (2 * math.pi) - math.pi)
            if difference <= FACING_TOLERANCE:
                answer = label
        if answer is None:
            continue
        distractors = tuple(
            _shuffled([option for option in FACING_OPTIONS if option != answer], rng)[: option_count - 1]
        )
        return Draft(
            template="facing_direction",
            question=f"As seen from the camera, which way is {_the(item)} facing?",
            answer=answer,
            distractors=distractors,
            object_ids=(item.object_id,),
            facts={"facing_angle_deg": _round(math.degrees(angle), 1)},
        )
    return None


def _horizontal_extreme(
    facts: ViewFacts, rng: np.random.Generator, option_count: int, leftmost: bool
) -> Draft | None:
    width = facts.view.width

    def position(item: ObjectInView) -> float:
        centroid = item.visibility.mask_centroid
        assert centroid is not None  # a nameable object has visible pixels, hence a mask centroid
        return centroid[0] / width

    items = _extreme_subset(list(facts.nameable), position, 0.08, option_count, rng, not leftmost)
    if len(items) < 2:
        return None
    side = "left" if leftmost else "right"
    return _extreme_choice(
        f"{side}most_in_image",
        f"Which of these objects is farthest to the {side} in the image?",
        items,
        position,
        not leftmost,
        "mask_centroid_u",
    )


def leftmost_in_image(facts: ViewFacts, rng: np.random.Generator, option_count: int) -> Draft | None:
    """Which object is farthest to the left in the image (mask centroid)."""
    return _horizontal_extreme(facts, rng, option_count, leftmost=True)


def rightmost_in_image(facts: ViewFacts, rng: np.random.Generator, option_count: int) -> Draft | None:
    """Which object is farthest to the right in the image (mask centroid)."""
    return _horizontal_extreme(facts, rng, option_count, leftmost=False)


def within_reach(facts: ViewFacts, rng: np.random.Generator, option_count: int) -> Draft | None:
    """Which object is within a given distance of the camera (exactly one is)."""
    items = sorted(facts.nameable, key=lambda item: item.distance)
    if len(items) < 2:
        return None
    nearest, runner_up = items[0], items[1]
    radius = round(nearest.distance + 0.3, 1)
    if runner_up.distance < radius + DISTANCE_MARGIN:
        return None
    distractors = _shuffled(items[1:], rng)[: option_count - 1]
    return Draft(
        template="within_reach",
        question=f"Which of these objects is less than {radius:.1f} metres from the camera?",
        answer=nearest.name,
        distractors=tuple(item.name for item in distractors),
        object_ids=(nearest.object_id,) + tuple(item.object_id for item in distractors),
        facts={
            "radius_m": radius,
            "distance_m": {str(item.object_id): _round(item.distance) for item in [nearest, *distractors]},
        },
    )


OMNISPATIAL_TASKS: dict[str, dict[str, tuple[Template, ...]]] = {
    "Dynamic_Reasoning": {
        "Manipulation": (support_surface,),
        "Motion_Analysis": (moved_object_distance, camera_forward_closest),
    },
    "Spatial_Interaction": {
        "Traffic_Analysis": (path_blocker,),
        "Localization": (image_region,),
        "Geospatial_Strategy": (closest_to_room_centre, nearest_to_object),
    },
    "Complex_Logic": {
        "Pattern_Recognition": (count_category, count_colour),
        "Geometric_Reasoning": (taller_object, bigger_object, distance_between),
    },
    "Perspective_Taking": {
        "Egocentric": (closest_to_camera, left_or_right_in_view, occluded_object),
        "Allocentric": (allocentric_left_or_right, facing_direction),
        "Hypothetical": (behind_from_viewpoint, facing_camera_left_or_right),
    },
}
"""OmniSpatial task type -> sub-task type -> templates."""

SPATIALAB_TASKS: dict[str, dict[str, tuple[Template, ...]]] = {
    "3D Geometry": {"Height Estimation": (top_height,), "Vertical Extent": (highest_top,)},
    "Depth & Occlusion": {
        "Depth Ordering": (closest_to_camera, farthest_from_camera),
        "Occlusion": (occluded_object,),
    },
    "Orientation": {"Object Facing": (facing_direction,)},
    "Relative Positioning": {
        "Horizontal Order": (leftmost_in_image, rightmost_in_image),
        "Support": (support_surface,),
    },
    "Size & Scale": {"Size Comparison": (bigger_object,), "Distance Estimation": (distance_between,)},
    "Spatial Navigation": {"Path Blocking": (path_blocker,), "Reachability": (within_reach,)},
}
"""SpatiaLab category -> sub-category -> templates."""


def ask(
    draft: Draft, task_type: str, sub_task_type: str, option_count: int, rng: np.random.Generator
) -> Question:
    """Draw the options of a draft (the answer plus up to `option_count - 1` distractors) and its gold index.

    >>> draft = Draft("t", "Which?", "a", ("b", "c", "d"), (0,))
    >>> question = ask(draft, "Egocentric", "Egocentric", 3, np.random.default_rng(0))
    >>> len(question.options), question.options[question.answer_index]
    (3, 'a')
    """
    distractors = list(draft.distractors)
    if len(distractors) > option_count - 1 and not draft.keep_all:
        keep = np.sort(rng.choice(len(distractors), size=option_count - 1, replace=False))
        distractors = [distractors[index] for index in keep]
    options = [draft.answer, *distractors]
    if draft.ordered:
        options = [option for option in draft.order if option in options]
    else:
        options = _shuffled(options, rng)
    return Question(
        task_type=task_type,
        sub_task_type=sub_task_type,
        question=draft.question,
        options=options,
        answer_index=options.index(draft.answer),
        template=draft.template,
        object_ids=tuple(draft.object_ids),
        facts=draft.facts,
    )


def questions_for_image(
    facts: ViewFacts,
    tasks: dict[str, dict[str, tuple[Template, ...]]],
    preferred_task_type: str,
    max_questions: int,
    rng: np.random.Generator,
    min_options: int,
    max_options: int,
) -> list[Question]:
    """Up to `max_questions` questions of one task type about one image.

    The preferred task type is tried first, then the others in catalogue order; the first task type
    that yields a question is used for every question of the image (the image sits in that task
    type's folder). Each template is used at most once per image.

    >>> from assets.sample_world.config import SampleWorldConfig
    >>> from assets.sample_world.render import SceneRenderer
    >>> from assets.sample_world.scene import sample_scene, sample_views
    >>> config = SampleWorldConfig(num_scenes=1, views_per_scene=1)
    >>> scene = sample_scene(config, 0)
    >>> view = sample_views(config, scene)[0]
    >>> facts = ViewFacts.build(scene, view, SceneRenderer(scene).render(view), config)
    >>> questions = questions_for_image(facts, OMNISPATIAL_TASKS, "Perspective_Taking", 2, np.random.default_rng(0), 2, 4)
    >>> all(2 <= len(q.options) <= 4 for q in questions)
    True
    """
    names = list(tasks)
    start = names.index(preferred_task_type)
    for task_type in names[start:] + names[:start]:
        entries = [
            (sub_task, template) for sub_task, templates in tasks[task_type].items() for template in templates
        ]
        questions: list[Question] = []
        for index in rng.permutation(len(entries)):
            sub_task, template = entries[index]
            option_count = int(rng.integers(min_options, max_options + 1))
            draft = template(facts, rng, option_count)
            if draft is None or 1 + len(draft.distractors) < min_options:
                continue
            questions.append(ask(draft, task_type, sub_task, option_count, rng))
            if len(questions) == max_questions:
                break
        if questions:
            return questions
    return []
