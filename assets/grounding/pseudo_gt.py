"""Build the ``pseudo_gt_boxes`` rows of one shard with the configured grounding backend.

Questions without phrases (skipped task types, or nothing boxable found) get a row with no boxes and
cost nothing. Questions with phrases are grounded by Grounding DINO (batched, see
:mod:`assets.grounding.detector`) or by the human boxes of a COCO instances file (see
:mod:`assets.grounding.annotations`). A question whose image does not decode, or (annotations) whose
image is not in the instances file, is quarantined with the reason; the others go on.

A shard is built in the run's process (``compute: local``, the default) or as a Ray task that loads its
own detector (``compute: ray``, :func:`assets.compute.partition_results`); the same code either way.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterator
from typing import ClassVar, Literal

import polars as pl
from pydantic import Field
from tqdm.auto import tqdm

from assets.compute import ComputeSettings
from assets.grounding.annotations import CocoInstances, ground_phrases, image_array
from assets.grounding.detector import Detection, DetectorSettings, GroundingDinoDetector
from data_contracts.images import ImageDecodeError, decode_image
from data_contracts.pseudo_gt_boxes import PseudoGtBoxes
from data_contracts.quarantine import QuarantineLog
from data_contracts.validation import polars_schema

logger = logging.getLogger(__name__)

ASSET_NAME = "pseudo_gt_boxes"


class PseudoGtSettings(DetectorSettings, ComputeSettings):
    """The grounding backend and its options (the ``pseudo_gt_boxes`` run config extends this model).

    The Grounding DINO fields are :class:`~assets.grounding.detector.DetectorSettings`' (the thresholds are
    recorded in the rows for ``annotations`` too); the compute fields
    (:class:`~assets.compute.ComputeSettings`) say where each shard runs. ``use_colour`` (the annotations backend tells same-category instances apart by
    colour) is a ``ClassVar``, a constant of the method, not run configuration.

    >>> PseudoGtSettings().backend
    'annotations'
    """

    backend: Literal["annotations", "grounding_dino"] = Field(
        default="annotations",
        description="'annotations' (human boxes of the sources' COCO instances file, validity 1.0; the sample world "
        "has them) or 'grounding_dino' (zero-shot detection, score as validity).",
    )

    # Constant of the annotations backend (not run configuration; a test may override it in a subclass).
    use_colour: ClassVar[bool] = True
    """annotations: tell same-category instances apart by the colour of their pixels."""


def _row(
    question: dict,
    shard: str,
    phrases: list[str],
    detection: Detection,
    backend: str,
    detector: str,
    settings: PseudoGtSettings,
) -> dict:
    return {
        "question_id": question["question_id"],
        "shard": shard,
        "image_width": question["image_width"],
        "image_height": question["image_height"],
        "phrases": phrases,
        "pseudo_gt": detection.pseudo_gt,
        "unmatched_phrases": detection.unmatched_phrases,
        "num_candidates": detection.num_candidates,
        "backend": backend,
        "detector": detector,
        "box_threshold": settings.box_threshold,
        "text_threshold": settings.text_threshold,
    }


def _chunks(items: list, size: int) -> Iterator[list]:
    for offset in range(0, len(items), size):
        yield items[offset : offset + size]


def build_pseudo_gt(
    questions: pl.DataFrame,
    object_phrases: pl.DataFrame,
    shard: str,
    settings: PseudoGtSettings,
    *,
    detector: GroundingDinoDetector | None = None,
    coco: CocoInstances | None = None,
    progress: bool = True,
) -> tuple[pl.DataFrame, QuarantineLog]:
    """The `pseudo_gt_boxes` rows of the questions in ``object_phrases``.

    Args:
        questions (`pl.DataFrame`): `mcq_questions` rows (`question_id`, `image`, `image_width`,
            `image_height`, `task_type`); extra rows are ignored.
        object_phrases (`pl.DataFrame`): the shard's `object_phrases` rows.
        shard (`str`): the shard key written in the `shard` column.
        settings (`PseudoGtSettings`): backend and thresholds.
        detector (`GroundingDinoDetector`, *optional*): for `grounding_dino`; loaded from the settings when
            omitted and needed.
        coco (`CocoInstances`, *optional*): required by `annotations` when any question has phrases.
        progress (`bool`, *optional*, defaults to `True`): show a progress bar.

    Returns:
        `tuple[pl.DataFrame, QuarantineLog]`: rows with the columns of the contract, and the quarantine.
    """
    log = QuarantineLog(ASSET_NAME)
    schema = polars_schema(PseudoGtBoxes)
    known = set(questions["question_id"].to_list())
    orphans = object_phrases.filter(~pl.col("question_id").is_in(list(known)))
    for question_id in orphans["question_id"].to_list():
        log.add(question_id, "question not found in mcq_questions (stale object_phrases row)")
    work = (
        object_phrases.select("question_id", "phrases")
        .join(
            questions.select("question_id", "image", "image_width", "image_height", "task_type"),
            on="question_id",
            how="inner",
        )
        .sort("question_id")
    )
    rows: list[dict] = []
    empty = work.filter(pl.col("phrases").list.len() == 0)
    queried = work.filter(pl.col("phrases").list.len() > 0)
    if settings.backend == "grounding_dino":
        detector_name = settings.model
    else:
        detector_name = f"coco:{coco.path}" if coco is not None else "coco"
    for question in empty.drop("image").iter_rows(named=True):
        rows.append(_row(question, shard, [], Detection(), settings.backend, detector_name, settings))
    if queried.height:
        if settings.backend == "grounding_dino":
            detector = detector or GroundingDinoDetector(settings)
            rows.extend(_detect(queried, shard, settings, detector, log, progress))
        else:
            if coco is None:
                raise ValueError("the annotations backend needs a COCO instances file")
            rows.extend(_annotate(queried, shard, settings, coco, log, detector_name, progress))
    frame = pl.DataFrame(rows, schema=schema).sort("question_id")
    logger.info(
        "pseudo-GT %s (%s): %d questions, %d with phrases, %d with boxes, %d quarantined",
        shard,
        settings.backend,
        frame.height,
        queried.height,
        int((frame["pseudo_gt"].list.len() > 0).sum()),
        len(log),
    )
    return frame, log


def _decoded(question: dict, log: QuarantineLog):
    try:
        return decode_image(question["image"])
    except ImageDecodeError as error:
        log.add(
            question["question_id"],
            f"image does not decode: {error}",
            source_file=(question["image"] or {}).get("path"),
        )
        return None


def _detect(
    queried: pl.DataFrame,
    shard: str,
    settings: PseudoGtSettings,
    detector: GroundingDinoDetector,
    log: QuarantineLog,
    progress: bool,
) -> list[dict]:
    """Run the detector batch by batch; an (image, phrases) pair seen before is not run again."""
    rows: list[dict] = []
    seen: dict[tuple[str, tuple[str, ...]], Detection] = {}
    records = list(queried.iter_rows(named=True))
    with tqdm(total=len(records), desc=f"grounding {shard}", unit="img", disable=not progress) as bar:
        for chunk in _chunks(records, settings.batch_size):
            keys = [
                (hashlib.sha256(question["image"]["bytes"]).hexdigest(), tuple(question["phrases"]))
                for question in chunk
            ]
            images, phrase_lists, batch_keys = [], [], []
            for question, key in zip(chunk, keys, strict=True):
                if key in seen or key in batch_keys:
                    continue
                image = _decoded(question, log)
                if image is None:
                    continue
                images.append(image)
                phrase_lists.append(question["phrases"])
                batch_keys.append(key)
            for key, detection in zip(batch_keys, detector.detect(images, phrase_lists), strict=True):
                seen[key] = detection
            for question, key in zip(chunk, keys, strict=True):
                if key in seen:
                    rows.append(
                        _row(
                            question,
                            shard,
                            question["phrases"],
                            seen[key],
                            settings.backend,
                            settings.model,
                            settings,
                        )
                    )
            bar.update(len(chunk))
    return rows


def _annotate(
    queried: pl.DataFrame,
    shard: str,
    settings: PseudoGtSettings,
    coco: CocoInstances,
    log: QuarantineLog,
    detector_name: str,
    progress: bool,
) -> list[dict]:
    rows: list[dict] = []
    for question in tqdm(
        queried.iter_rows(named=True),
        total=queried.height,
        desc=f"annotations {shard}",
        unit="q",
        disable=not progress,
    ):
        cell = question["image"] or {}
        image_id = coco.image_id_for(cell.get("path"), question["task_type"], cell.get("bytes"))
        if image_id is None:
            log.add(
                question["question_id"],
                f"image {cell.get('path')!r} is not in the COCO instances file {coco.path}",
                source_file=cell.get("path"),
            )
            continue
        width, height = coco.image_size(image_id)
        pixels = None
        if settings.use_colour:
            image = _decoded(question, log)
            if image is None:
                continue
            pixels = image_array(image, width, height)
        matched, unmatched = ground_phrases(
            question["phrases"], coco.instances[image_id], width=width, height=height, image=pixels
        )
        detection = Detection(
            pseudo_gt=matched, unmatched_phrases=unmatched, num_candidates=len(coco.instances[image_id])
        )
        rows.append(
            _row(question, shard, question["phrases"], detection, settings.backend, detector_name, settings)
        )
    return rows
