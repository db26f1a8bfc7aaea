"""Answers of DGE questions: what an evaluator finds, the full answer, rounding, and the lookups they share.

An evaluator returns an :class:`Evaluation` (frames, options and chosen option or a number with its
unit, the justifying values, and whether the answer is clear under the geometry's own
uncertainty); :func:`assets.dge.tasks.registry.evaluate_spec` adds the task type and the question
text to make a :class:`TaskAnswer`.

Precision policy (stated in each numeric question, see :func:`precision_phrase`): centimetres to the
nearest centimetre from 10 cm up and to 1 decimal below 10 cm, metres to 2 decimals (the nearest
centimetre), square metres to 1 decimal, counts as integers.

Measurement confidence: when the geometry carries per-object uncertainty, comparisons use margins
of ``margin_sigmas`` combined standard deviations (never below the floors) instead of the fixed
margins, and objects measured too poorly for a question are withheld with the reason (see
:func:`size_problem`, :func:`position_problem`, :func:`distance_margin`, :func:`direction_margin`).

>>> numeric([0], 2.345, "m", {}).numeric_answer
2.35
>>> format_number(85.6, "cm"), format_number(2.57, "cm")
('86', '2.6')
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from assets.dge.tasks.facts import CameraFact, ObjectFact, SceneFacts
from assets.dge.tasks.settings import TaskSettings

DECIMALS_BY_UNIT: dict[str | None, int] = {"m": 2, "cm": 0, "m^2": 1, None: 0}
"""Decimals kept in numeric answers, by unit (None: counts)."""

Spec = dict[str, Any]
"""A question's JSON-able description: object ids, frame indices, options (see each task type)."""


NOT_VISIBLE = "object not clearly visible in the frames"
"""Withholding reason shared by every task type."""


class SpecError(ValueError):
    """A spec that refers to objects or frames the facts do not have."""


@dataclass(frozen=True)
class Evaluation:
    """What an evaluator finds: frames shown, options and answer (an option text or a number), facts, clarity."""

    frame_indices: list[int]
    options: list[str]
    answer_option: str | None
    numeric_answer: float | None
    unit: str | None
    values: dict[str, Any]
    clear: bool
    reason: str = ""


@dataclass(frozen=True)
class TaskAnswer:
    """A computed question: text, frames, options and answer (an option text or a number), facts."""

    task_type: str
    question: str
    frame_indices: list[int]
    options: list[str]
    answer_option: str | None
    numeric_answer: float | None
    unit: str | None
    values: dict[str, Any]
    clear: bool
    reason: str = ""


FINE_CM_BELOW = 10.0
"""Centimetre answers below this are given to 1 decimal (a 2.57 cm height is 2.6, not 3)."""


def decimals_for(value: float, unit: str | None) -> int:
    """Decimals kept in a numeric answer of this size and unit (see the module's precision policy).

    >>> decimals_for(85.6, "cm"), decimals_for(2.57, "cm"), decimals_for(2.345, "m")
    (0, 1, 2)
    """
    if unit == "cm" and abs(float(value)) < FINE_CM_BELOW:
        return 1
    return DECIMALS_BY_UNIT[unit]


def precision_phrase(value: float, unit: str | None) -> str:
    """How precisely the question asks for the answer, as said in its wording.

    >>> precision_phrase(85.6, "cm"), precision_phrase(2.57, "cm"), precision_phrase(2.3, "m")
    ('to the nearest centimetre', 'to 1 decimal place', 'to 2 decimal places (the nearest centimetre)')
    """
    digits = decimals_for(value, unit)
    if unit == "cm" and digits == 0:
        return "to the nearest centimetre"
    if unit == "m":
        return "to 2 decimal places (the nearest centimetre)"
    if digits == 0:
        return "as a whole number"
    return f"to {digits} decimal place{'s' if digits > 1 else ''}"


def round_answer(value: float, unit: str | None) -> float:
    """A numeric answer rounded to its precision (integers stay integral floats).

    >>> round_answer(31.52, "m^2"), round_answer(85.6, "cm"), round_answer(3, None), round_answer(2.57, "cm")
    (31.5, 86.0, 3.0, 2.6)
    """
    digits = decimals_for(value, unit)
    rounded = round(float(value), digits)
    return float(int(rounded)) if digits == 0 else rounded


def format_number(value: float, unit: str | None) -> str:
    """The answer text of a numeric answer (no unit; the unit has its own column).

    >>> format_number(2.345, "m"), format_number(85.6, "cm"), format_number(31.52, "m^2"), format_number(3, None)
    ('2.35', '86', '31.5', '3')
    """
    return f"{round_answer(value, unit):.{decimals_for(value, unit)}f}"


def first_failure(*checks: tuple[bool, str]) -> str:
    """The reason of the first check that fails, or ``""`` when every one passes (the answer is clear).

    >>> first_failure((True, "a"), (False, "too close")), first_failure((True, "a"))
    ('too close', '')
    """
    return next((reason for passed, reason in checks if not passed), "")


def combined_position_sigma(objects: Iterable[ObjectFact]) -> float | None:
    """Root sum of squares of the objects' centroid standard deviations (None when one is unknown)."""
    sigmas = [obj.position_uncertainty_m for obj in objects]
    known = [sigma for sigma in sigmas if sigma is not None]
    if not sigmas or len(known) < len(sigmas):
        return None
    return math.sqrt(sum(sigma * sigma for sigma in known))


def distance_margin(objects: Iterable[ObjectFact], fixed_m: float, settings: TaskSettings) -> float:
    """Least gap between two compared distances or depths of these objects.

    ``margin_sigmas`` combined standard deviations (at least ``distance_margin_floor_m``) when every
    object carries its uncertainty, else the fixed margin.
    """
    sigma = combined_position_sigma(objects)
    if sigma is None:
        return fixed_m
    return max(settings.margin_sigmas * sigma, settings.distance_margin_floor_m)


def direction_margin(
    objects: Iterable[ObjectFact], reference_m: float, fixed_deg: float, settings: TaskSettings
) -> float:
    """Least angle (degrees) to a direction boundary, from the objects' uncertainty seen ``reference_m`` away.

    ``margin_sigmas`` combined standard deviations as an angle at that distance (at least
    ``direction_margin_floor_deg``) when every object carries its uncertainty, else ``fixed_deg``.
    """
    sigma = combined_position_sigma(objects)
    if sigma is None or reference_m <= 0:
        return fixed_deg
    spread = math.degrees(math.atan2(settings.margin_sigmas * sigma, reference_m))
    return max(spread, settings.direction_margin_floor_deg)


def position_problem(objects: Iterable[ObjectFact], settings: TaskSettings, comparison: bool = False) -> str:
    """Why an object's position is too uncertain for a distance or direction question (``""`` when fine).

    A measured distance is held to ``max_position_uncertainty_m``; a comparison (which is closer, which side) to
    ``max_comparison_position_uncertainty_m``, since its margin already grows with the objects' uncertainty.
    """
    limit = (
        settings.max_comparison_position_uncertainty_m if comparison else settings.max_position_uncertainty_m
    )
    for obj in objects:
        sigma = obj.position_uncertainty_m
        if sigma is not None and sigma > limit:
            return "position too uncertain"
    return ""


def size_problem(obj: ObjectFact, size_m: float, settings: TaskSettings) -> str:
    """Why an object is measured too poorly for a size question (``""`` when fine or unknown)."""
    if obj.observed_views is not None and obj.observed_views < settings.min_observed_views:
        return "too few views of the object"
    if obj.extent_coverage is not None and obj.extent_coverage < settings.min_extent_coverage:
        return "object's extent not covered by the frames"
    if (
        obj.size_uncertainty_m is not None
        and obj.size_uncertainty_m > settings.max_size_uncertainty_relative * size_m
    ):
        return "size too uncertain"
    return ""


def numeric(
    frames: Iterable[int],
    value: float,
    unit: str | None,
    values: dict[str, Any],
    clear: bool = True,
    reason: str = "",
) -> Evaluation:
    """A numeric evaluation (the value rounded to its precision, which ``values["precision"]`` records)."""
    values = {**values, "precision": precision_phrase(value, unit)}
    return Evaluation(list(frames), [], None, round_answer(value, unit), unit, values, clear, reason)


def choice(
    frames: Iterable[int],
    options: Sequence[str],
    answer: str | None,
    values: dict[str, Any],
    clear: bool,
    reason: str = "",
) -> Evaluation:
    """A multiple-choice evaluation (``answer`` is one of ``options``, or None when there is none)."""
    return Evaluation(list(frames), list(options), answer, None, None, values, clear, reason)


def object_fact(facts: SceneFacts, object_id: int) -> ObjectFact:
    """The object; raises :class:`SpecError` for an unknown id."""
    if object_id not in facts.objects:
        raise SpecError(f"object {object_id} is not in scene {facts.scene_id}")
    return facts.objects[object_id]


def object_name(facts: SceneFacts, object_id: int) -> str:
    """The label a question names the object by; raises :class:`SpecError` for an unknown id."""
    return object_fact(facts, object_id).label


def camera_of(facts: SceneFacts, frame_index: int) -> CameraFact:
    """The frame's camera; raises :class:`SpecError` for an unknown frame."""
    if frame_index not in facts.cameras:
        raise SpecError(f"frame {frame_index} is not in scene {facts.scene_id}")
    return facts.cameras[frame_index]


def clearly_visible(facts: SceneFacts, frame_index: int, object_id: int, settings: TaskSettings) -> bool:
    """The frame shows the object with a box, mostly unoccluded and mostly inside the image."""
    seen = facts.seen_in(frame_index, object_id)
    return (
        seen is not None
        and seen.bbox is not None
        and seen.visibility >= settings.min_visibility
        and seen.in_frame >= settings.min_in_frame
    )


def all_visible(
    facts: SceneFacts, frames: Iterable[int], objects: Iterable[int], settings: TaskSettings
) -> bool:
    """Every object is clearly visible in at least one of the frames."""
    frames = list(frames)
    return all(any(clearly_visible(facts, f, o, settings) for f in frames) for o in objects)
