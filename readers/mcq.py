"""Readers for the multiple-choice sources: OmniSpatial (``data.json``, 0-based ``answer``) and SpatiaLab (1-based ``Answer``).

OmniSpatial images live at ``<root>/<task_type>/<id prefix>.<ext>``; SpatiaLab tables come as
``.json``, ``.jsonl``, ``.csv`` or ``.parquet``. Each reader returns a frame under the
``mcq_questions`` contract and a quarantine log of the records it rejected.
"""

from __future__ import annotations

import csv
import logging
import math
from pathlib import Path
from typing import Any

import polars as pl

from data_contracts import mcq_questions
from data_contracts.quarantine import QuarantineLog
from data_contracts.stable_hash import stable_split
from data_contracts.validation import polars_schema
from readers.common import (
    IMAGE_EXTENSIONS,
    LETTERS,
    ImageCache,
    image_problem,
    load_json,
    read_jsonl,
    require_path,
)

logger = logging.getLogger(__name__)


def _omnispatial_image(root: Path, task_type: str, question_id: str) -> Path | None:
    stem = question_id.split("_")[0]
    folder = root / task_type
    for extension in IMAGE_EXTENSIONS:
        candidate = folder / f"{stem}{extension}"
        if candidate.exists():
            return candidate
    matches = sorted(folder.glob(f"{stem}.*")) if folder.is_dir() else []
    return matches[0] if matches else None


def _mcq_row(
    *,
    question_id: str,
    cell: dict,
    width: int,
    height: int,
    question: str,
    options: list[str],
    answer_index: int,
    task_type: str,
    sub_task_type: str,
    split: str,
    source: str,
) -> dict:
    return {
        "question_id": question_id,
        "image": cell,
        "image_width": width,
        "image_height": height,
        "question": question,
        "options": options,
        "answer_index": answer_index,
        "answer": LETTERS[answer_index],
        "task_type": task_type,
        "sub_task_type": sub_task_type,
        "split": split,
        "source": source,
    }


def _validate_choice(options: Any, answer: Any, base: int) -> tuple[list[str], int] | str:
    """Return ``(options, 0-based index)`` or the reason the record is bad."""
    if not isinstance(options, list) or not all(isinstance(option, str) for option in options):
        return "bad options: options must be a list of strings"
    if len(options) > len(LETTERS):
        return f"bad options: {len(options)} options, at most {len(LETTERS)} supported"
    if isinstance(answer, bool) or not isinstance(answer, (int, float)) or not float(answer).is_integer():
        return f"bad answer: {answer!r} is not an integer index"
    index = int(answer) - base
    if index < 0 or (options and index >= len(options)) or index >= len(LETTERS):
        return f"answer out of range: index {int(answer)} for {len(options)} options ({base}-based)"
    return options, index


def read_omnispatial(
    root: str | Path,
    *,
    split: str = "hash",
    test_fraction: float = 0.2,
    source: str = "omnispatial",
    config_field: str = "omnispatial_root",
) -> tuple[pl.DataFrame, QuarantineLog]:
    """Read an OmniSpatial folder (``data.json`` plus images by task type).

    ``split`` labels every row (``"train"``/``"test"``) or, with ``"hash"``, assigns rows to train or
    test by a stable hash of the image id so that questions about one image stay together.
    """
    folder = require_path(root, config_field, "OmniSpatial folder")
    data_file = require_path(folder / "data.json", config_field, "OmniSpatial data.json")
    log = QuarantineLog("mcq_questions")
    records = load_json(data_file, log)
    if records is None:
        return pl.DataFrame(schema=polars_schema(mcq_questions.McqQuestions)), log
    if not isinstance(records, list):
        log.add(
            data_file.name, "malformed JSON: top level is not a list of questions", source_file=str(data_file)
        )
        return pl.DataFrame(schema=polars_schema(mcq_questions.McqQuestions)), log
    cache = ImageCache()
    rows: list[dict] = []
    for position, record in enumerate(records):
        record_id = str(record.get("id", f"#{position}")) if isinstance(record, dict) else f"#{position}"
        if not isinstance(record, dict):
            log.add(record_id, "malformed record: not an object", source_file=str(data_file), payload=record)
            continue
        missing = [key for key in ("id", "task_type", "question", "options", "answer") if key not in record]
        if missing:
            log.add(record_id, f"missing fields: {missing}", source_file=str(data_file), payload=record)
            continue
        checked = _validate_choice(record["options"], record["answer"], base=0)
        if isinstance(checked, str):
            log.add(record_id, checked, source_file=str(data_file), payload=record)
            continue
        options, index = checked
        task_type = str(record["task_type"])
        image_path = _omnispatial_image(folder, task_type, record_id)
        image, problem = image_problem(cache, image_path, record_id)
        if image is None:
            log.add(record_id, problem, source_file=str(image_path or data_file), payload=record)
            continue
        cell, width, height = image
        row_split = stable_split(record_id.split("_")[0], test_fraction) if split == "hash" else split
        rows.append(
            _mcq_row(
                question_id=f"{source}/{record_id}",
                cell=cell,
                width=width,
                height=height,
                question=str(record["question"]),
                options=options,
                answer_index=index,
                task_type=task_type,
                sub_task_type=str(record.get("sub_task_type") or ""),
                split=row_split,
                source=source,
            )
        )
    logger.info("OmniSpatial %s: %d questions kept, %d quarantined", folder, len(rows), len(log))
    return pl.DataFrame(rows, schema=polars_schema(mcq_questions.McqQuestions)), log


def _spatialab_records(path: Path, log: QuarantineLog) -> list[dict] | None:
    suffix = path.suffix.lower()
    if suffix == ".json":
        data = load_json(path, log)
        if data is None:
            return None
        if isinstance(data, dict):
            data = data.get("data") or data.get("rows") or list(data.values())
        return data if isinstance(data, list) else None
    if suffix == ".jsonl":
        return read_jsonl(path, log)
    if suffix == ".csv":
        with path.open(newline="", encoding="utf-8") as handle:
            return list(csv.DictReader(handle))
    if suffix == ".parquet":
        return pl.read_parquet(path).to_dicts()
    log.add(
        path.name,
        f"unsupported file type {suffix!r}: use .json, .jsonl, .csv or .parquet",
        source_file=str(path),
    )
    return None


def _as_int(value: Any) -> Any:
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value.strip())
    return value


def read_spatialab(
    path: str | Path,
    *,
    images_dir: str | Path | None = None,
    split: str = "test",
    source: str = "spatialab",
    config_field: str = "spatialab_path",
) -> tuple[pl.DataFrame, QuarantineLog]:
    """Read SpatiaLab (``id, Category, Sub_Category, Question, Option_1..4, Answer (1-4), Image_Filename``)."""
    table = require_path(path, config_field, "SpatiaLab table")
    image_folder = Path(images_dir) if images_dir else table.parent / "images"
    log = QuarantineLog("mcq_questions")
    records = _spatialab_records(table, log)
    if records is None:
        return pl.DataFrame(schema=polars_schema(mcq_questions.McqQuestions)), log
    cache = ImageCache()
    rows: list[dict] = []
    for position, record in enumerate(records):
        record_id = str(record.get("id", f"#{position}")) if isinstance(record, dict) else f"#{position}"
        if not isinstance(record, dict):
            log.add(record_id, "malformed record: not an object", source_file=str(table), payload=record)
            continue
        options = []
        for k in range(1, 5):
            value = record.get(f"Option_{k}")
            if value is None or (isinstance(value, float) and math.isnan(value)) or str(value).strip() == "":
                continue
            options.append(str(value))
        missing = [key for key in ("Question", "Answer", "Image_Filename") if record.get(key) in (None, "")]
        if missing:
            log.add(record_id, f"missing fields: {missing}", source_file=str(table), payload=record)
            continue
        checked = _validate_choice(options, _as_int(record["Answer"]), base=1)
        if isinstance(checked, str):
            log.add(record_id, checked, source_file=str(table), payload=record)
            continue
        options, index = checked
        image_path = image_folder / str(record["Image_Filename"])
        image, problem = image_problem(cache, image_path, record_id)
        if image is None:
            log.add(record_id, problem, source_file=str(image_path), payload=record)
            continue
        cell, width, height = image
        rows.append(
            _mcq_row(
                question_id=f"{source}/{record_id}",
                cell=cell,
                width=width,
                height=height,
                question=str(record["Question"]),
                options=options,
                answer_index=index,
                task_type=str(record.get("Category") or ""),
                sub_task_type=str(record.get("Sub_Category") or ""),
                split=split,
                source=source,
            )
        )
    logger.info("SpatiaLab %s: %d questions kept, %d quarantined", table, len(rows), len(log))
    return pl.DataFrame(rows, schema=polars_schema(mcq_questions.McqQuestions)), log


# --------------------------------------------------------------------------------------------------
# Visual Genome
# --------------------------------------------------------------------------------------------------
