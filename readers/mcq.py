"""Readers for the multiple-choice sources: OmniSpatial (``data.json``, 0-based ``answer``) and SpatiaLab (1-based ``Answer``).

OmniSpatial images live at ``<root>/<task_type>/<id prefix>.<ext>``. Its ids (``<image>_<question>``)
restart in every task folder, so a question id is ``omnispatial/<task_type>/<id>``, unique by
construction. The folder may also be the one level above ``data.json`` (an unzipped release inside a
Hub snapshot).

SpatiaLab is released as ``data.json`` + ``img/``; tables also come as ``.jsonl``, ``.csv`` or
``.parquet`` and images in ``images/``. The table may be given as a file or as its folder, and the
image folder is ``spatialab_images_dir`` when set, else ``img/`` or ``images/`` beside the table (or the
table's own folder), whichever holds the file.

Each source has two readers: :func:`omnispatial_questions` / :func:`spatialab_questions` give the questions under
the ``mcq_questions`` contract (every image read and decoded once, its bytes not kept: a question names its image
by ``image_sha256`` and keeps its ``image_path``), which the ``mcq_questions`` asset writes beside one row per
distinct image (:func:`iter_image_cells`); :func:`read_omnispatial` / :func:`read_spatialab` give the same rows
with each image embedded (for an evaluation set or a test). Each also returns a quarantine log of the records it
rejected. Every path may be a Hub dataset (see :func:`readers.common.resolve_location`).

Every image path a record names stays inside its root (OmniSpatial: the folder of ``data.json``; SpatiaLab:
``spatialab_images_dir`` when set, else the table's folder), symbolic links followed: one that escapes
(``../../outside.png``, ``/etc/passwd``, a link to a file outside) is quarantined ("path escapes its root")
and never opened. Text is bounded (:data:`OMNISPATIAL_TEXT_BOUNDS`, :data:`SPATIALAB_TEXT_BOUNDS`): a question
over 4,000 characters, an option over 1,000, a task type, category or id over 200, a file name over 1,024 is
quarantined with the field, its length and the bound. Tables are read as ``utf-8-sig`` (a byte-order mark is
accepted).
"""

from __future__ import annotations

import csv
import hashlib
import logging
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import polars as pl

from data_contracts import mcq_questions
from data_contracts.images import ImageDecodeError, read_image_file
from data_contracts.quarantine import QuarantineLog
from data_contracts.stable_hash import stable_fraction, stable_split
from data_contracts.validation import polars_schema
from readers.common import (
    IMAGE_EXTENSIONS,
    LETTERS,
    MAX_FILE_NAME_CHARS,
    MAX_LABEL_CHARS,
    MAX_OPTION_CHARS,
    MAX_QUESTION_CHARS,
    TEXT_ENCODING,
    MissingInputError,
    column_problem,
    id_type_problem,
    load_json,
    missing_fields,
    path_escape_problem,
    read_jsonl,
    require_path,
    text_field_problem,
)

logger = logging.getLogger(__name__)
SPATIALAB_IMAGE_FOLDERS = ("img", "images")
SPATIALAB_TABLE_SUFFIXES = (".json", ".jsonl", ".csv", ".parquet")
SPATIALAB_REQUIRED_COLUMNS = ("Question", "Answer", "Image_Filename")
OMNISPATIAL_REQUIRED_FIELDS = ("id", "task_type", "question", "options", "answer")
OMNISPATIAL_TEXT_BOUNDS = {
    "id": MAX_LABEL_CHARS,
    "task_type": MAX_LABEL_CHARS,
    "sub_task_type": MAX_LABEL_CHARS,
    "question": MAX_QUESTION_CHARS,
}
"""The longest text (characters) of each OmniSpatial field; every option is bounded by ``MAX_OPTION_CHARS``."""
SPATIALAB_TEXT_BOUNDS = {
    "id": MAX_LABEL_CHARS,
    "Category": MAX_LABEL_CHARS,
    "Sub_Category": MAX_LABEL_CHARS,
    "Question": MAX_QUESTION_CHARS,
    "Image_Filename": MAX_FILE_NAME_CHARS,
}
"""The longest text (characters) of each SpatiaLab field; every option is bounded by ``MAX_OPTION_CHARS``."""


def omnispatial_question_id(source: str, task_type: str, record_id: str) -> str:
    """The question id of an OmniSpatial record: ids restart per task folder, so the task type is part of it.

    >>> omnispatial_question_id("omnispatial", "Complex_Logic", "12_0")
    'omnispatial/Complex_Logic/12_0'
    """
    return f"{source}/{task_type}/{record_id}"


def _omnispatial_folder(folder: Path, config_field: str) -> Path:
    """The folder holding ``data.json``: ``folder`` itself or its one subfolder that holds it."""
    if (folder / "data.json").is_file():
        return folder
    nested = sorted(path.parent for path in folder.glob("*/data.json"))
    if len(nested) == 1:
        return nested[0]
    archives = sorted(folder.glob("*.zip"))
    hint = f" (unzip {archives[0].name} and point it at the folder inside)" if archives else ""
    raise MissingInputError(
        f"OmniSpatial data.json not found in {folder} nor in one of its subfolders: "
        f"set the config field `{config_field}` to the folder holding data.json{hint}."
    )


def _blank_id(record: dict) -> bool:
    """True when a record has no usable id (absent, null or blank): it is then named by its position."""
    value = record.get("id")
    return value is None or (isinstance(value, str) and not value.strip())


def _omnispatial_image(root: Path, task_type: str, question_id: str) -> Path | None:
    """The image of a question: ``<root>/<task_type>/<id prefix>.<ext>``; the path as named, not looked for, when it
    escapes ``root`` (it is then reported, never opened)."""
    stem = question_id.split("_")[0]
    folder = root / task_type
    if path_escape_problem(folder / stem, root):
        return folder / stem
    for extension in IMAGE_EXTENSIONS:
        candidate = folder / f"{stem}{extension}"
        if candidate.exists():
            return candidate
    matches = sorted(folder.glob(f"{stem}.*")) if folder.is_dir() else []
    return matches[0] if matches else None


class ImageIndex:
    """Each image file read and decoded once: its SHA-256 and size, or why it is unusable. No bytes are kept, so
    the questions of a data set of any size fit in memory (several questions share an image)."""

    def __init__(self) -> None:
        self._known: dict[Path, tuple[str, int, int] | str] = {}

    def get(self, path: Path | None, record_id: str, root: Path) -> tuple[tuple[str, int, int] | None, str]:
        """``((sha256, width, height), "")``, or ``(None, reason)`` for a missing or corrupt image or one that escapes
        ``root`` (the folder it is relative to: it is then not opened)."""
        escape = path_escape_problem(path, root) if path is not None else ""
        if escape:
            return None, escape
        if path is None or not path.exists():
            return None, f"missing image: {path if path is not None else 'no file for ' + record_id}"
        if path not in self._known:
            try:
                cell, width, height = read_image_file(path)
                self._known[path] = (hashlib.sha256(cell["bytes"]).hexdigest(), width, height)
            except ImageDecodeError as error:
                self._known[path] = f"corrupt image: {error}"
        known = self._known[path]
        return (None, known) if isinstance(known, str) else (known, "")


def question_frame(rows: list[dict]) -> pl.DataFrame:
    """Question rows as a frame under the ``mcq_questions`` contract, with each image's ``image_path``."""
    schema = {**polars_schema(mcq_questions.McqQuestions), "image_path": pl.String()}
    return pl.DataFrame(rows, schema=schema)


def iter_image_cells(questions: pl.DataFrame) -> Iterator[dict]:
    """One ``mcq_images`` row per distinct image of ``questions`` (a :func:`question_frame`), in order, each file
    read when its row is made."""
    distinct = questions.select("image_sha256", "image_path", "image_width", "image_height").unique(
        "image_sha256", keep="first", maintain_order=True
    )
    for sha, path, width, height in distinct.iter_rows():
        cell, _, _ = read_image_file(path)
        yield {"image_sha256": sha, "image": cell, "image_width": width, "image_height": height}


def with_image_cells(questions: pl.DataFrame) -> pl.DataFrame:
    """``questions`` (a :func:`question_frame`) with each image embedded (``image``), ``image_path`` dropped."""
    cells = {row["image_sha256"]: row["image"] for row in iter_image_cells(questions)}
    schema = polars_schema(mcq_questions.McqQuestionsWithImage)
    return questions.with_columns(
        image=pl.Series([cells[sha] for sha in questions["image_sha256"]], dtype=schema["image"])
    ).select(list(schema))


def _mcq_row(
    *,
    question_id: str,
    image: tuple[str, int, int],
    image_path: Path,
    question: str,
    options: list[str],
    answer_index: int,
    task_type: str,
    sub_task_type: str,
    split: str,
    source: str,
) -> dict:
    sha, width, height = image
    return {
        "question_id": question_id,
        "image_sha256": sha,
        "image_path": str(image_path),
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
    named = {f"option {LETTERS[index]}": option for index, option in enumerate(options)}
    too_long = text_field_problem(named, named, dict.fromkeys(named, MAX_OPTION_CHARS))
    if too_long:
        return too_long
    if isinstance(answer, bool) or not isinstance(answer, (int, float)) or not float(answer).is_integer():
        return f"bad answer: {answer!r} is not an integer index"
    index = int(answer) - base
    if index < 0 or (options and index >= len(options)) or index >= len(LETTERS):
        return f"answer out of range: index {int(answer)} for {len(options)} options ({base}-based)"
    return options, index


def _ensure_a_test_image(rows: list[dict]) -> None:
    """Put the rows of the image with the smallest stable hash in ``test`` when there are two images or more and none
    is in test (in place; an image is the part of the question id before its ``_``).

    >>> rows = [{"question_id": f"omnispatial/T/{image}_0", "split": "train"} for image in (1, 2, 3)]
    >>> _ensure_a_test_image(rows); [row["split"] for row in rows].count("test")
    1
    """
    images = {_image_key(row) for row in rows}
    if len(images) < 2 or any(row["split"] == "test" for row in rows):
        return
    first = min(images, key=stable_fraction)
    for row in rows:
        if _image_key(row) == first:
            row["split"] = "test"


def _image_key(row: dict) -> str:
    """The image of an OmniSpatial row: its question id's record id before the ``_``."""
    return str(row["question_id"]).rsplit("/", 1)[-1].split("_")[0]


def read_omnispatial(root: str | Path, **options: Any) -> tuple[pl.DataFrame, QuarantineLog]:
    """:func:`omnispatial_questions` with each image embedded (``image``), for an evaluation set or a test."""
    questions, log = omnispatial_questions(root, **options)
    return with_image_cells(questions), log


def omnispatial_questions(
    root: str | Path,
    *,
    split: str = "hash",
    test_fraction: float = 0.2,
    source: str = "omnispatial",
    config_field: str = "omnispatial_root",
) -> tuple[pl.DataFrame, QuarantineLog]:
    """Read an OmniSpatial folder (``data.json`` plus images by task type): its questions (a
    :func:`question_frame`) and the records rejected.

    ``split`` labels every row (``"train"``/``"test"``) or, with ``"hash"``, assigns rows to train or
    test by a stable hash of the image id so that questions about one image stay together. A set of two
    images or more whose every image hashes into train (a small one) puts the image with the smallest
    hash in test, so that the test split is never empty.
    """
    folder = _omnispatial_folder(require_path(root, config_field, "OmniSpatial folder"), config_field)
    data_file = folder / "data.json"
    log = QuarantineLog("mcq_questions")
    records = load_json(data_file, log)
    if records is None:
        return question_frame([]), log
    if not isinstance(records, list):
        log.add(
            data_file.name, "malformed JSON: top level is not a list of questions", source_file=str(data_file)
        )
        return question_frame([]), log
    images = ImageIndex()
    rows: list[dict] = []
    for position, record in enumerate(records):
        if not isinstance(record, dict):
            log.add(
                f"#{position}", "malformed record: not an object", source_file=str(data_file), payload=record
            )
            continue
        problem = id_type_problem(record["id"]) if record.get("id") is not None else ""
        record_id = f"#{position}" if problem or _blank_id(record) else str(record["id"])
        problem = (
            missing_fields(record, OMNISPATIAL_REQUIRED_FIELDS)
            or problem
            or text_field_problem(record, ("task_type", "question"), OMNISPATIAL_TEXT_BOUNDS)
        )
        if problem:
            log.add(record_id, problem, source_file=str(data_file), payload=record)
            continue
        checked = _validate_choice(record["options"], record["answer"], base=0)
        if isinstance(checked, str):
            log.add(record_id, checked, source_file=str(data_file), payload=record)
            continue
        options, index = checked
        task_type = str(record["task_type"])
        image_path = _omnispatial_image(folder, task_type, record_id)
        image, problem = images.get(image_path, record_id, folder)
        if image is None:
            log.add(
                f"{task_type}/{record_id}", problem, source_file=str(image_path or data_file), payload=record
            )
            continue
        assert image_path is not None  # an image was read from it
        row_split = stable_split(record_id.split("_")[0], test_fraction) if split == "hash" else split
        rows.append(
            _mcq_row(
                question_id=omnispatial_question_id(source, task_type, record_id),
                image=image,
                image_path=image_path,
                question=str(record["question"]),
                options=options,
                answer_index=index,
                task_type=task_type,
                sub_task_type=str(record.get("sub_task_type") or ""),
                split=row_split,
                source=source,
            )
        )
    if split == "hash" and test_fraction > 0:
        _ensure_a_test_image(rows)
    logger.info("OmniSpatial %s: %d questions kept, %d quarantined", folder, len(rows), len(log))
    return question_frame(rows), log


def _spatialab_records(path: Path, log: QuarantineLog) -> list[dict] | None:
    suffix = path.suffix.lower()
    if suffix == ".json":
        data = load_json(path, log)
        if data is None:
            return None
        if isinstance(data, dict):
            data = next((data[key] for key in ("data", "rows") if key in data), list(data.values()))
        if not isinstance(data, list):
            log.add(
                path.name,
                "malformed JSON: top level is not a list of questions (nor an object holding one)",
                source_file=str(path),
            )
            return None
        return data
    if suffix == ".jsonl":
        return read_jsonl(path, log)
    if suffix == ".csv":
        with path.open(newline="", encoding=TEXT_ENCODING) as handle:
            return list(csv.DictReader(handle))
    if suffix == ".parquet":
        problem = column_problem(pl.read_parquet_schema(path), SPATIALAB_REQUIRED_COLUMNS)
        if problem:
            log.add(path.name, problem, source_file=str(path))
            return None
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


def _spatialab_table(location: Path, config_field: str) -> Path:
    """The SpatiaLab table at ``location``: the file itself, else ``data.json`` or the one table in the folder."""
    if location.is_file():
        return location
    if (location / "data.json").is_file():
        return location / "data.json"
    tables = sorted(
        path
        for path in location.iterdir()
        if path.is_file() and path.suffix.lower() in SPATIALAB_TABLE_SUFFIXES
    )
    if len(tables) == 1:
        return tables[0]
    found = f"found {[path.name for path in tables]}" if tables else "found none"
    raise MissingInputError(
        f"no single SpatiaLab table in {location} ({found}): set the config field `{config_field}` "
        "to the table file (data.json, .jsonl, .csv or .parquet)."
    )


def spatialab_image_folders(table: Path, images_dir: str | Path | None) -> list[Path]:
    """Where SpatiaLab images are looked for, in order: the configured folder, else ``img/``, ``images/``, the table's folder.

    Raises:
        `MissingInputError`: when ``images_dir`` is set but does not exist.
    """
    if images_dir:
        return [require_path(images_dir, "spatialab_images_dir", "SpatiaLab images folder")]
    found = [table.parent / name for name in SPATIALAB_IMAGE_FOLDERS if (table.parent / name).is_dir()]
    return [*found, table.parent]


def _spatialab_image(folders: list[Path], filename: str, root: Path) -> Path:
    """The first existing ``folder / filename``; the first folder's candidate (reported missing) when none exists,
    or the first candidate that escapes ``root`` (reported, never looked for)."""
    for folder in folders:
        candidate = folder / filename
        if path_escape_problem(candidate, root):
            return candidate
        if candidate.is_file():
            return candidate
    return folders[0] / filename


def read_spatialab(path: str | Path, **options: Any) -> tuple[pl.DataFrame, QuarantineLog]:
    """:func:`spatialab_questions` with each image embedded (``image``), for an evaluation set or a test."""
    questions, log = spatialab_questions(path, **options)
    return with_image_cells(questions), log


def spatialab_questions(
    path: str | Path,
    *,
    images_dir: str | Path | None = None,
    split: str = "test",
    source: str = "spatialab",
    config_field: str = "spatialab_path",
) -> tuple[pl.DataFrame, QuarantineLog]:
    """Read SpatiaLab (``id, Category, Sub_Category, Question, Option_1..4, Answer (1-4), Image_Filename``): its
    questions (a :func:`question_frame`) and the records rejected.

    ``path`` is the table or its folder (the release: ``data.json`` + ``img/``); images are looked for
    in ``images_dir`` when given, else in ``img/``, ``images/`` and the table's folder.
    """
    table = _spatialab_table(require_path(path, config_field, "SpatiaLab table"), config_field)
    image_folders = spatialab_image_folders(table, images_dir)
    image_root = image_folders[0] if images_dir else table.parent  # where every image must stay
    log = QuarantineLog("mcq_questions")
    records = _spatialab_records(table, log)
    if records is None:
        return question_frame([]), log
    images = ImageIndex()
    rows: list[dict] = []
    for position, record in enumerate(records):
        if not isinstance(record, dict):
            log.add(f"#{position}", "malformed record: not an object", source_file=str(table), payload=record)
            continue
        problem = id_type_problem(record["id"]) if record.get("id") is not None else ""
        record_id = f"#{position}" if problem or _blank_id(record) else str(record["id"])
        options = []
        for k in range(1, 5):
            value = record.get(f"Option_{k}")
            if value is None or (isinstance(value, float) and math.isnan(value)) or str(value).strip() == "":
                continue
            options.append(str(value))
        problem = (
            missing_fields(record, SPATIALAB_REQUIRED_COLUMNS)
            or problem
            or text_field_problem(record, ("Question", "Image_Filename"), SPATIALAB_TEXT_BOUNDS)
        )
        if problem:
            log.add(record_id, problem, source_file=str(table), payload=record)
            continue
        checked = _validate_choice(options, _as_int(record["Answer"]), base=1)
        if isinstance(checked, str):
            log.add(record_id, checked, source_file=str(table), payload=record)
            continue
        options, index = checked
        image_path = _spatialab_image(image_folders, str(record["Image_Filename"]), image_root)
        image, problem = images.get(image_path, record_id, image_root)
        if image is None:
            log.add(record_id, problem, source_file=str(image_path), payload=record)
            continue
        rows.append(
            _mcq_row(
                question_id=f"{source}/{record_id}",
                image=image,
                image_path=image_path,
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
    return question_frame(rows), log


# --------------------------------------------------------------------------------------------------
# Visual Genome
# --------------------------------------------------------------------------------------------------
