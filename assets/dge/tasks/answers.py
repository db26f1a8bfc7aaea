"""Answers of DGE questions: what an evaluator finds, the full answer, rounding, and the lookups they share.

An evaluator returns an :class:`Evaluation` (frames, options and chosen option or a number with its
unit, the justifying values, and whether the answer is clear under the geometry's own
uncertainty); :func:`assets.dge.tasks.registry.evaluate_spec` adds the task type and the question
text to make a :class:`TaskAnswer`. Numeric answers are rounded: metres to 2 decimals, centimetres
to integers, square metres to 1 decimal, counts to integers.

>>> numeric([0], 2.345, "m", {}).numeric_answer
2.35
>>> format_number(85.6, "cm")
'86'
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from assets.dge.tasks.facts import CameraFact, ObjectFact, SceneFacts
from assets.dge.tasks.settings import TaskSettings

DECIMALS_BY_UNIT: dict[str | None, int] = {"m": 2, "cm": 0, "m^2": 1, None: 0}
"""Decimals kept in numeric answers, by unit (None: counts)."""

Spec = dict[str, Any]
"""A question's JSON-able description: object ids, frame indices, options (see each task type)."""


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


def round_answer(value: float, unit: str | None) -> float:
    """A numeric answer rounded to its unit's decimals (integers stay integral floats).

    >>> round_answer(31.52, "m^2"), round_answer(85.6, "cm"), round_answer(3, None)
    (31.5, 86.0, 3.0)
    """
    digits = DECIMALS_BY_UNIT[unit]
    rounded = round(float(value), digits)
    return float(int(rounded)) if digits == 0 else rounded


def format_number(value: float, unit: str | None) -> str:
    """The answer text of a numeric answer (no unit; the unit has its own column).

    >>> format_number(2.345, "m"), format_number(85.6, "cm"), format_number(31.52, "m^2"), format_number(3, None)
    ('2.35', '86', '31.5', '3')
    """
    return f"{round_answer(value, unit):.{DECIMALS_BY_UNIT[unit]}f}"


def numeric(
    frames: Iterable[int],
    value: float,
    unit: str | None,
    values: dict[str, Any],
    clear: bool = True,
    reason: str = "",
) -> Evaluation:
    """A numeric evaluation (the value rounded to its unit)."""
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
