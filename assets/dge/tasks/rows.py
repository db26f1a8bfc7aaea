"""``dge_tasks`` rows: generated questions with their images, gold letter or number, and justifying facts.

A row's ``facts`` JSON holds the question's spec (from which the answer can be recomputed), the
evaluator's values, the geometry source, the margins that decided clarity and, for estimated
geometry, its provenance.

>>> margins_of("depth_order", TaskSettings())
{'min_visibility': 0.5, 'min_in_frame': 0.5, 'depth_margin_m': 0.15}
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Mapping
from typing import Any

import numpy as np
import polars as pl
from PIL import Image, UnidentifiedImageError

from assets.dge.tasks.answers import SpecError, format_number
from assets.dge.tasks.facts import CameraFact, SceneFacts, scene_facts_from_tables
from assets.dge.tasks.generation import GeneratedTask, GenerationReport, generate_tasks
from assets.dge.tasks.registry import DEFAULT_TASK_SETTINGS, task_type_entry
from assets.dge.tasks.settings import TaskSettings
from data_contracts.dge_tasks import DgeTasks
from data_contracts.images import encode_image, upright_image
from data_contracts.mcq_questions import LETTERS
from data_contracts.quarantine import QuarantineLog
from data_contracts.stable_hash import stable_split
from data_contracts.validation import polars_schema

logger = logging.getLogger(__name__)

VISIBILITY_MARGINS = ("min_visibility", "min_in_frame")
"""Settings every task type's clarity depends on."""


def margins_of(task_type: str, settings: TaskSettings) -> dict[str, float]:
    """The settings that decide whether an answer of the task type is clear, with their values."""
    names = (*VISIBILITY_MARGINS, *task_type_entry(task_type).margins)
    return {name: getattr(settings, name) for name in names}


def _image_cell(camera: CameraFact, scene_id: str, settings: TaskSettings, cache: dict[int, dict]) -> dict:
    if camera.frame_index in cache:
        return cache[camera.frame_index]
    if camera.color_path is None:
        raise SpecError(f"frame {camera.frame_index} of scene {scene_id} has no image file")
    name = f"{scene_id}/{camera.frame_index}{'.jpg' if settings.image_max_side else ''}"
    if settings.image_max_side:
        with Image.open(camera.color_path) as opened:
            image = upright_image(opened.convert("RGB"), camera.upright_turns)
            image.thumbnail((settings.image_max_side, settings.image_max_side))
            cell = encode_image(image, path=name, fmt="JPEG")
    elif camera.upright_turns % 4:  # a frame stored rotated: shown upright, as its pose and intrinsics are
        with Image.open(camera.color_path) as image:
            cell = encode_image(upright_image(image.convert("RGB"), camera.upright_turns), path=f"{name}.png")
    else:
        suffix = camera.color_path.rsplit(".", 1)[-1] if "." in camera.color_path else "jpg"
        cell = encode_image(camera.color_path, path=f"{name}.{suffix}")
    cache[camera.frame_index] = cell
    return cell


IMAGE_ERRORS = (OSError, UnidentifiedImageError, SyntaxError, ValueError)
"""What reading a missing, truncated or corrupt image file raises (``FileNotFoundError`` is an ``OSError``)."""


def colour_problem(path: str | None) -> str:
    """Empty when the colour image can be decoded, else why not (JPEGs are decoded at 1/8 scale, which is fast).

    >>> colour_problem("/nonexistent/0.jpg").startswith("missing colour image")
    True
    """
    if path is None:
        return "no colour image in the frame table"
    try:
        with Image.open(path) as image:
            image.draft("RGB", (max(1, image.width // 8), max(1, image.height // 8)))
            image.load()
    except FileNotFoundError as error:
        return f"missing colour image: {error}"
    except IMAGE_ERRORS as error:
        return f"unreadable colour image: {error}"
    return ""


def drop_unreadable_frames(facts: SceneFacts, quarantine: QuarantineLog | None = None) -> SceneFacts:
    """The facts without the frames whose colour image cannot be read; each is quarantined with the reason.

    Questions are then drawn from the remaining frames, so one bad file costs its frame, not the scene.
    """
    bad = {}
    for index, camera in facts.cameras.items():
        problem = colour_problem(camera.color_path)
        if problem:
            bad[index] = problem
            logger.warning("scene %s frame %d: %s", facts.scene_id, index, problem)
            if quarantine is not None:
                quarantine.add(f"{facts.scene_id}/{index}", problem, source_file=camera.color_path)
    if not bad:
        return facts
    return dataclasses.replace(
        facts,
        cameras={index: camera for index, camera in facts.cameras.items() if index not in bad},
        seen={key: value for key, value in facts.seen.items() if key[0] not in bad},
    )


def _json_default(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def _answer_text(task: GeneratedTask) -> str:
    """The answer column: the answer option's letter, or the numeric answer's text."""
    if task.answer_index is not None:
        return LETTERS[task.answer_index]
    if task.answer.numeric_answer is None:
        raise ValueError(f"task {task.task_id} has neither an answer option nor a numeric answer")
    return format_number(task.answer.numeric_answer, task.answer.unit)


def tasks_to_frame(
    tasks: list[GeneratedTask],
    facts: SceneFacts,
    settings: TaskSettings = DEFAULT_TASK_SETTINGS,
    images: dict[int, dict] | None = None,
    quarantine: QuarantineLog | None = None,
) -> pl.DataFrame:
    """``dge_tasks`` rows for generated tasks (images read from the frames' colour files).

    ``images`` may map frame indices to ready image cells (single-image mode passes its image). A
    task whose image cannot be read is left out and added to ``quarantine`` with the reason.
    """
    cache: dict[int, dict] = dict(images or {})
    split = stable_split(facts.scene_id, settings.test_fraction)
    rows = []
    for task in tasks:
        answer = task.answer
        try:
            cells = [
                cache[f] if f in cache else _image_cell(facts.cameras[f], facts.scene_id, settings, cache)
                for f in answer.frame_indices
            ]
        except IMAGE_ERRORS as error:
            logger.warning("task %s left out: cannot read its image: %s", task.task_id, error)
            if quarantine is not None:
                quarantine.add(task.task_id, f"unreadable colour image: {error}", source_file=None)
            continue
        facts_json = json.dumps(
            {
                "spec": task.spec,
                "values": answer.values,
                "geometry_source": facts.geometry_source,
                "margins": margins_of(task.task_type, settings),
                **({"provenance": facts.provenance} if facts.provenance else {}),
            },
            default=_json_default,
            sort_keys=True,
        )
        rows.append(
            {
                "task_id": task.task_id,
                "scene_id": task.scene_id,
                "task_type": task.task_type,
                "images": cells,
                "frame_indices": list(answer.frame_indices),
                "question": answer.question,
                "options": task.options,
                "answer_index": task.answer_index,
                "answer": _answer_text(task),
                "numeric_answer": answer.numeric_answer,
                "unit": answer.unit,
                "facts": facts_json,
                "geometry_source": facts.geometry_source,
                "split": split,
                "origin": facts.origin,
                "dataset": facts.dataset,
            }
        )
    return pl.DataFrame(rows, schema=polars_schema(DgeTasks))


def build_scene_tasks(
    geometry_row: Mapping[str, Any],
    visibility: pl.DataFrame,
    frames: pl.DataFrame,
    settings: TaskSettings = DEFAULT_TASK_SETTINGS,
    quarantine: QuarantineLog | None = None,
    report: GenerationReport | None = None,
) -> pl.DataFrame:
    """The ``dge_tasks`` rows of one scanned scene (see :func:`generate_tasks` and :func:`tasks_to_frame`).

    Frames whose colour image is missing or corrupt are quarantined and never shown (see
    :func:`drop_unreadable_frames`). ``report``, when given, receives per task type the candidates,
    the withheld ones by reason and the questions emitted.
    """
    facts = scene_facts_from_tables(geometry_row, visibility, frames, settings.min_room_rectangularity)
    facts = drop_unreadable_frames(facts, quarantine)
    tasks = generate_tasks(facts, settings, report)
    logger.info("scene %s: %d DGE tasks", facts.scene_id, len(tasks))
    return tasks_to_frame(tasks, facts, settings, quarantine=quarantine)
