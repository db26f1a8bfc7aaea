"""Benchmark loaders: each benchmark's native files into one ``eval_items`` table (see the contract).

Every loader returns ``(frame, quarantine)``: the items under :class:`~data_contracts.eval_items.EvalItems`
and a :class:`~data_contracts.quarantine.QuarantineLog` of the records it could not use (with the
reason and the file), so one bad record never stops a benchmark.

The native answer conventions differ and are respected one by one; the gold answer always comes from
the benchmark's own index or letter, never from option text:

| benchmark | native files | gold answer | quirks handled |
|---|---|---|---|
| OmniSpatial test | ``data.json`` + ``<task_type>/<id prefix>.<ext>`` | ``answer``: 0-based index | options may be empty (drawn in the image) |
| SpatiaLab | ``data.json`` + ``img/`` (or ``.jsonl/.csv/.parquet``, ``images/``) | ``Answer``: 1-based over ``Option_1..4`` | digits inside option text |
| CV-Bench | ``test*.parquet`` (or ``test.jsonl`` + ``img/``) | ``answer``: ``"(A)"`` | JPEG bytes under ``.png`` names |
| 3DSRBench | VLMEvalKit TSV, base64 images | ``answer``: bare letter | empty/NaN ``C``/``D``; ``-flip`` and ``-N`` qid variants; image cells that refer to another row |
| BLINK | ``<Subset>/val-*.parquet`` | ``answer``: ``"(A)"`` | up to four images per item |
| STVQA val | the ``stvqa`` table | ``answer``: letter | ground-truth scene as reference boxes |
| DGE held-out | the ``dge_tasks`` table | ``answer_index`` or ``numeric_answer`` | numeric items with units |

Every location may be a local path or a Hugging Face Hub dataset, ``hf://datasets/OWNER/NAME[@REVISION][/PATH]``
(see :func:`readers.common.resolve_location`), e.g. ``hf://datasets/nyu-visionx/CV-Bench``. A Parquet
file without the columns a loader reads is quarantined once, naming the missing columns, and a
benchmark that holds no record, or whose records are all quarantined, fails the load with one sentence
naming the input (and the first reasons) (:class:`~readers.common.EmptySourceError`), so an emptied file
or a wrong layout never scores as an empty benchmark.

>>> parenthesized_letter("(B)"), parenthesized_letter("B"), parenthesized_letter("(b) left")
('B', None, None)
>>> threedsr_variant("a1b2c3d4-flip-2")
('a1b2c3d4', True, 2)
"""

from __future__ import annotations

import base64
import binascii
import csv
import io
import json
import logging
import math
import re
import sys
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, Literal

import polars as pl
from PIL import Image, UnidentifiedImageError
from pydantic import BaseModel, Field

from data_contracts.eval_items import LETTERS, EvalItems
from data_contracts.images import sniff_format
from data_contracts.origin import REAL, SAMPLE_WORLD
from data_contracts.quarantine import QuarantineLog
from data_contracts.validation import polars_schema, split_valid
from readers.common import (
    TEXT_ENCODING,
    MissingInputError,
    column_problem,
    parse_hub_location,
    path_escape_problem,
    read_jsonl,
    require_path,
    require_rows,
)
from readers.mcq import read_omnispatial, read_spatialab
from readers.scene_graphs import split_from_file_name
from training.eval.predictions import content_hash
from training.rewards.parsing import gold_option_letter, scene_object_name

logger = logging.getLogger(__name__)

QUARANTINE_ASSET = "eval_items"
BENCHMARK_NAMES = ("omnispatial", "spatialab", "cvbench", "3dsrbench", "blink", "stvqa_val", "dge_heldout")
BENCHMARK_ALIASES = {
    "omnispatial": "omnispatial",
    "spatialab": "spatialab",
    "cvbench": "cvbench",
    "cv-bench": "cvbench",
    "cv_bench": "cvbench",
    "3dsrbench": "3dsrbench",
    "3dsr": "3dsrbench",
    "blink": "blink",
    "stvqa": "stvqa_val",
    "stvqa_val": "stvqa_val",
    "dge": "dge_heldout",
    "dge_heldout": "dge_heldout",
    "dge_tasks": "dge_heldout",
}
BLINK_SPATIAL_SUBSETS = ("Relative_Depth", "Spatial_Relation")
MISSING_OPTION_TEXTS = frozenset({"", "nan", "none", "null"})
CVBENCH_COLUMNS = ("choices", "answer", "question")
THREEDSR_COLUMNS = ("question", "answer", "A", "B", "image")
BLINK_COLUMNS = ("choices", "answer", "question", "image_1")
BENCHMARK_LOCATION_FIELDS = {
    "omnispatial": "omnispatial_root",
    "spatialab": "spatialab_path",
    "cvbench": "cvbench_path",
    "3dsrbench": "threedsrbench_path",
    "blink": "blink_path",
    "stvqa_val": "stvqa_path",
    "dge_heldout": "dge_tasks_path",
}
_EXTENSIONS = {"png": ".png", "jpeg": ".jpg", "gif": ".gif", "bmp": ".bmp", "webp": ".webp"}
_PARENTHESIZED_LETTER = re.compile(r"\s*\(([A-Z])\)\s*")
_THREEDSR_QID = re.compile(r"(?P<base>.+?)(?P<flip>-flip)?(?:-(?P<circular>\d+))?")


# --------------------------------------------------------------------------------------------------
# Small helpers
# --------------------------------------------------------------------------------------------------


def parenthesized_letter(answer: Any) -> str | None:
    """The letter of a CV-Bench / BLINK answer ``"(A)"``; ``None`` for any other form.

    >>> parenthesized_letter(" (C) ")
    'C'
    """
    if not isinstance(answer, str):
        return None
    match = _PARENTHESIZED_LETTER.fullmatch(answer)
    return match.group(1) if match else None


def threedsr_variant(qid: str) -> tuple[str, bool, int]:
    """Split a 3DSRBench qid into ``(question key, flipped, circular index)``.

    VLMEvalKit's 3DSRBench TSV names the variants of a question ``<qid>``, ``<qid>-flip``, ``<qid>-N``
    and ``<qid>-flip-N`` (N the option rotation).

    >>> threedsr_variant("q17"), threedsr_variant("q17-3")
    (('q17', False, 0), ('q17', False, 3))
    """
    match = _THREEDSR_QID.fullmatch(qid)
    if match is None:
        return qid, False, 0
    circular = match.group("circular")
    return match.group("base"), match.group("flip") is not None, int(circular) if circular else 0


def threedsr_main_category(category: str) -> str:
    """The main 3DSRBench category (``height``, ``location``, ``orientation``, ``multi_object``).

    >>> threedsr_main_category("multi_object_facing"), threedsr_main_category("location_above")
    ('multi_object', 'location')
    """
    return "multi_object" if "multi_object" in category else category.split("_")[0]


def image_cell_from_bytes(data: bytes, name: str | None) -> tuple[dict, int, int]:
    """An image cell from encoded bytes whose format is sniffed, not taken from ``name``.

    The cell's path gets the extension of the real format (CV-Bench ships JPEG bytes under ``.png``
    names). Raises ``ValueError`` naming the image when the bytes are not a readable image.

    >>> buffer = io.BytesIO(); Image.new("RGB", (4, 3)).save(buffer, format="JPEG")
    >>> cell, width, height = image_cell_from_bytes(buffer.getvalue(), "img/0.png")
    >>> cell["path"], width, height
    ('img/0.jpg', 4, 3)
    """
    if not isinstance(data, (bytes, bytearray)) or not data:
        raise ValueError(f"image {name!r} has no bytes")
    data = bytes(data)
    kind = sniff_format(data)
    if kind is None:
        raise ValueError(f"image {name!r} bytes are not a known image format")
    try:
        with Image.open(io.BytesIO(data)) as image:
            image.load()
            width, height = image.size
    except (UnidentifiedImageError, OSError, SyntaxError) as error:
        raise ValueError(f"image {name!r} cannot be decoded: {error}") from error
    path = name
    if name:
        stem, dot, extension = name.rpartition(".")
        if dot and f".{extension.lower()}" not in (_EXTENSIONS[kind], ".jpeg" if kind == "jpeg" else ""):
            path = stem + _EXTENSIONS[kind]
    return {"bytes": data, "path": path}, width, height


def _missing(value: Any) -> bool:
    if value is None:
        return True
    if isinstance(value, float) and math.isnan(value):
        return True
    return isinstance(value, str) and value.strip().lower() in MISSING_OPTION_TEXTS


def _item(
    *,
    benchmark: str,
    item_id: str,
    images: list[dict],
    width: int,
    height: int,
    question: str,
    options: list[str],
    answer_index: int | None,
    category: str,
    task_type: str,
    source: str,
    split: str,
    numeric_answer: float | None = None,
    unit: str | None = None,
    answer_text: str | None = None,
    question_key: str | None = None,
    flipped: bool = False,
    circular_index: int = 0,
    reference_boxes: list[dict] | None = None,
) -> dict:
    if answer_index is not None:
        answer, answer_format = LETTERS[answer_index], "choice"
    else:
        answer, answer_format = answer_text if answer_text else repr(numeric_answer), "numeric"
    return {
        "benchmark": benchmark,
        "item_id": item_id,
        "images": images,
        "image_width": int(width),
        "image_height": int(height),
        "question": question,
        "options": options,
        "answer_format": answer_format,
        "answer_index": answer_index,
        "answer": answer,
        "numeric_answer": numeric_answer,
        "unit": unit,
        "category": category,
        "task_type": task_type,
        "source": source,
        "question_key": question_key or item_id,
        "flipped": flipped,
        "circular_index": circular_index,
        "reference_boxes": reference_boxes or [],
        "split": split,
        "origin": REAL,
    }


def finish_items(rows: list[dict], log: QuarantineLog, source_file: str | None = None) -> pl.DataFrame:
    """Rows -> a frame under the contract; rows that break it (or repeat an id) go to ``log``.

    >>> frame = finish_items([], QuarantineLog("eval_items"))
    >>> frame.height, "question_key" in frame.columns
    (0, True)
    """
    schema = polars_schema(EvalItems)
    if not rows:
        return pl.DataFrame(schema=schema)
    seen: set[tuple[str, str]] = set()
    unique_rows = []
    for row in rows:
        key = (row["benchmark"], row["item_id"])
        if key in seen:
            log.add(row["item_id"], "duplicate item id", source_file=source_file, payload=_payload(row))
            continue
        seen.add(key)
        unique_rows.append(row)
    frame = pl.DataFrame(unique_rows, schema=schema)
    valid, invalid, _ = split_valid(frame, EvalItems)
    for row in invalid.iter_rows(named=True):
        log.add(
            row["item_id"],
            f"contract violation: {row['reason']}",
            source_file=source_file,
            payload=_payload(row),
        )
    return valid


def _payload(row: dict) -> dict:
    return {
        key: value
        for key, value in row.items()
        if key not in ("images", "image") and not isinstance(value, bytes)
    }


def read_parquet_table(path: str | Path) -> pl.DataFrame:
    """A Parquet table from one file or a folder of files (partitions are concatenated).

    Raises:
        `MissingInputError`: when there is no Parquet file at ``path``.
    """
    location = Path(path)
    if location.is_file():
        return pl.read_parquet(location)
    files = sorted(location.rglob("*.parquet")) if location.is_dir() else []
    if not files:
        raise MissingInputError(
            f"no Parquet table at {location}: expected a .parquet file or a folder of them"
        )
    return pl.concat([pl.read_parquet(file) for file in files], how="diagonal_relaxed")


# --------------------------------------------------------------------------------------------------
# OmniSpatial and SpatiaLab (through the source readers)
# --------------------------------------------------------------------------------------------------


def eval_items_from_mcq(
    frame: pl.DataFrame,
    benchmark: str,
    *,
    category_column: str = "sub_task_type",
    task_type_column: str = "task_type",
) -> pl.DataFrame:
    """``mcq_questions`` rows (one image, 0-based gold index) -> eval items.

    Args:
        frame (`pl.DataFrame`): rows of the ``mcq_questions`` table.
        benchmark (`str`): the benchmark name to give them.
        category_column (`str`, *optional*, defaults to `"sub_task_type"`): column reported per category
            (OmniSpatial's sub-task types are the columns of SpatialCORE Table 1; SpatiaLab's categories,
            held in ``task_type``, are those of Table 2).
        task_type_column (`str`, *optional*, defaults to `"task_type"`): the coarser group.
    """
    if frame.height == 0:
        return pl.DataFrame(schema=polars_schema(EvalItems))
    items = frame.select(
        pl.lit(benchmark).alias("benchmark"),
        pl.col("question_id").alias("item_id"),
        pl.concat_list([pl.col("image")]).alias("images"),
        pl.col("image_width").cast(pl.Int64),
        pl.col("image_height").cast(pl.Int64),
        pl.col("question"),
        pl.col("options"),
        pl.lit("choice").alias("answer_format"),
        pl.col("answer_index").cast(pl.Int64),
        pl.col("answer"),
        pl.lit(None, dtype=pl.Float64).alias("numeric_answer"),
        pl.lit(None, dtype=pl.String).alias("unit"),
        pl.col(category_column).alias("category"),
        pl.col(task_type_column).alias("task_type"),
        pl.col("source"),
        pl.col("question_id").alias("question_key"),
        pl.lit(False).alias("flipped"),
        pl.lit(0, dtype=pl.Int64).alias("circular_index"),
        pl.lit([], dtype=polars_schema(EvalItems)["reference_boxes"]).alias("reference_boxes"),
        pl.col("split"),
        (pl.col("origin").fill_null(REAL) if "origin" in frame.columns else pl.lit(REAL)).alias("origin"),
    )
    return items.cast(polars_schema(EvalItems))


def load_omnispatial(
    root: str | Path, *, split: str = "all", test_fraction: float = 0.2
) -> tuple[pl.DataFrame, QuarantineLog]:
    """OmniSpatial test items from its folder (``data.json``, 0-based ``answer``).

    Args:
        root (`str` or `Path`): the folder with ``data.json``.
        split (`str`, *optional*, defaults to `"all"`): ``"all"`` keeps every question (the released
            test set); ``"test"`` / ``"train"`` keep the rows of the stable image-hash split the
            ``mcq_questions`` source uses (the sample world's OmniSpatial-like test split).
        test_fraction (`float`, *optional*, defaults to `0.2`): test share of the hash split.
    """
    if split not in ("all", "test", "train"):
        raise ValueError(f"OmniSpatial split must be 'all', 'test' or 'train', got {split!r}")
    frame, log = read_omnispatial(
        root, split="hash" if split != "all" else "test", test_fraction=test_fraction
    )
    log.source_asset = QUARANTINE_ASSET
    for row in log.rows:
        row["source_asset"] = QUARANTINE_ASSET
    if split != "all":
        frame = frame.filter(pl.col("split") == split)
    items = finish_items(
        eval_items_from_mcq(frame, "omnispatial", category_column="sub_task_type").to_dicts(), log, str(root)
    )
    what = "OmniSpatial" if split == "all" else f"OmniSpatial ({split} split)"
    require_rows(items.height, log, what=what, location=root, config_field="omnispatial_root")
    return items, log


def load_spatialab(
    path: str | Path, *, images_dir: str | Path | None = None
) -> tuple[pl.DataFrame, QuarantineLog]:
    """SpatiaLab items (``Answer`` 1-based over ``Option_1..Option_4``; categories are Table 2's columns).

    ``path`` is the table or its folder (the release: ``data.json`` + ``img/``); images are read from
    ``images_dir`` when given, else from ``img/`` or ``images/`` beside the table.
    """
    frame, log = read_spatialab(path, images_dir=images_dir)
    for row in log.rows:
        row["source_asset"] = QUARANTINE_ASSET
    log.source_asset = QUARANTINE_ASSET
    items = finish_items(
        eval_items_from_mcq(frame, "spatialab", category_column="task_type").to_dicts(), log, str(path)
    )
    require_rows(
        items.height,
        log,
        what="SpatiaLab",
        location=path,
        config_field="spatialab_path` / `spatialab_images_dir",
    )
    return items, log


# --------------------------------------------------------------------------------------------------
# CV-Bench
# --------------------------------------------------------------------------------------------------

CVBENCH_TASK_TYPES = {"count": "2D", "relation": "2D", "depth": "3D", "distance": "3D"}


def _cvbench_files(path: Path) -> list[Path]:
    """The CV-Bench files under ``path``: ``test_2d``/``test_3d`` Parquet (not the combined ``test.parquet``
    beside them), any Parquet, else ``test.jsonl``."""
    if path.is_file():
        return [path]
    files = sorted(path.rglob("*.parquet"))
    split_files = [file for file in files if file.stem.startswith(("test_2d", "test_3d"))]
    return split_files or files or sorted(path.rglob("*.jsonl"))


def _cvbench_records(file: Path, log: QuarantineLog) -> list[dict]:
    if file.suffix == ".parquet":
        columns = pl.read_parquet_schema(file)
        problem = column_problem(columns, CVBENCH_COLUMNS)
        if not problem and "image" not in columns and "filename" not in columns:
            problem = f"wrong columns: missing 'image' (or 'filename') (the file has {list(columns)})"
        if problem:
            log.add(file.name, problem, source_file=str(file))
            return []
        return pl.read_parquet(file).to_dicts()
    return read_jsonl(file, log)


def _cvbench_image(record: dict, file: Path) -> tuple[bytes, str | None]:
    image = record.get("image")
    if isinstance(image, dict) and image.get("bytes"):
        return image["bytes"], image.get("path") or record.get("filename")
    filename = record.get("filename")
    if not filename:
        raise ValueError("no image bytes and no filename")
    image_path = file.parent / str(filename)
    escape = path_escape_problem(image_path, file.parent)
    if escape:
        raise ValueError(escape)
    if not image_path.is_file():
        raise ValueError(f"missing image: {image_path}")
    return image_path.read_bytes(), str(filename)


def load_cvbench(path: str | Path) -> tuple[pl.DataFrame, QuarantineLog]:
    """CV-Bench (2D: Count, Relation from ADE20K and COCO; 3D: Depth, Distance from Omni3D).

    Reads the Hugging Face Parquet files (``test_2d.parquet``, ``test_3d.parquet`` or ``test.parquet``:
    ``idx, type, task, image, question, choices, answer, source``) or ``test.jsonl`` with ``img/``.
    ``answer`` is ``"(A)"``; image bytes are sniffed (JPEG bytes hide under ``.png`` names).
    """
    location = require_path(path, "cvbench_path", "CV-Bench data")
    log = QuarantineLog(QUARANTINE_ASSET)
    rows: list[dict] = []
    for file in _cvbench_files(location):
        for position, record in enumerate(_cvbench_records(file, log)):
            record_id = str(record.get("idx", f"#{position}"))
            problem = _cvbench_row(record, record_id, file, rows)
            if problem:
                log.add(record_id, problem, source_file=str(file), payload=_payload(record))
    logger.info("CV-Bench %s: %d items kept, %d quarantined", location, len(rows), len(log))
    items = finish_items(rows, log, str(location))
    require_rows(items.height, log, what="CV-Bench", location=path, config_field="cvbench_path")
    return items, log


def _cvbench_row(record: dict, record_id: str, file: Path, rows: list[dict]) -> str | None:
    choices = record.get("choices")
    if (
        not isinstance(choices, list)
        or not choices
        or not all(isinstance(choice, (str, int, float)) for choice in choices)
    ):
        return "bad options: choices must be a non-empty list"
    options = [str(choice) for choice in choices]
    letter = parenthesized_letter(record.get("answer"))
    if letter is None:
        return f"bad answer: {record.get('answer')!r} is not of the form '(A)'"
    index = LETTERS.index(letter)
    if index >= len(options):
        return f"answer out of range: {letter} for {len(options)} options"
    question = str(record.get("question") or "").strip()
    if not question:
        return "missing fields: ['question']"
    try:
        data, name = _cvbench_image(record, file)
        cell, width, height = image_cell_from_bytes(data, name)
    except ValueError as error:
        return f"image: {error}"
    task = str(record.get("task") or "")
    task_type = str(record.get("type") or CVBENCH_TASK_TYPES.get(task.lower(), "")).upper()
    if task_type not in ("2D", "3D"):
        return f"unknown CV-Bench type {record.get('type')!r} for task {task!r}"
    rows.append(
        _item(
            benchmark="cvbench",
            item_id=f"cvbench/{task_type.lower()}/{record_id}",
            images=[cell],
            width=width,
            height=height,
            question=question,
            options=options,
            answer_index=index,
            category=task,
            task_type=task_type,
            source=str(record.get("source") or task_type),
            split="test",
        )
    )
    return None


# --------------------------------------------------------------------------------------------------
# 3DSRBench
# --------------------------------------------------------------------------------------------------


def _decode_base64_images(value: str) -> list[bytes]:
    text = value.strip()
    encoded = json.loads(text) if text.startswith("[") else [text]
    return [base64.b64decode(item, validate=False) for item in encoded]


def _threedsr_file(location: Path) -> Path:
    """The TSV at ``location``: the file itself, or the one TSV in the folder (the VLMEvalKit one among several)."""
    if location.is_file():
        return location
    files = sorted(location.rglob("*.tsv"))
    if len(files) > 1:
        files = [file for file in files if "vlmevalkit" in file.name.lower()] or files
    if len(files) == 1:
        return files[0]
    found = f"found {[file.name for file in files]}" if files else "found none"
    raise MissingInputError(
        f"no single 3DSRBench TSV in {location} ({found}): set `threedsrbench_path` to the VLMEvalKit TSV file."
    )


def load_3dsrbench(path: str | Path) -> tuple[pl.DataFrame, QuarantineLog]:
    """3DSRBench from its VLMEvalKit TSV (``index, qid, question, A..D, answer, category, image``).

    ``answer`` is a bare letter; 2-option rows leave ``C``/``D`` empty (NaN once a dataframe library
    has read them); ``image`` is base64 (or, for repeated images, the ``index`` of the row holding
    it); ``qid`` suffixes ``-flip`` and ``-N`` mark the FlipEval and CircularEval variants. ``path``
    may be the TSV or a folder holding it.
    """
    file = _threedsr_file(require_path(path, "threedsrbench_path", "3DSRBench TSV"))
    log = QuarantineLog(QUARANTINE_ASSET)
    csv.field_size_limit(sys.maxsize)
    with file.open(newline="", encoding=TEXT_ENCODING) as handle:
        reader = csv.DictReader(handle, delimiter="\t")
        problem: str | None = column_problem(reader.fieldnames or [], THREEDSR_COLUMNS)
        records = [] if problem else list(reader)
    if problem:
        log.add(file.name, problem, source_file=str(file))
    image_by_index = {str(record.get("index")): record.get("image") or "" for record in records}
    rows: list[dict] = []
    for position, record in enumerate(records):
        record_id = str(record.get("qid") or record.get("index") or f"#{position}")
        problem = _threedsr_row(record, record_id, image_by_index, rows)
        if problem:
            log.add(
                record_id,
                problem,
                source_file=str(file),
                payload={k: v for k, v in record.items() if k != "image"},
            )
    logger.info("3DSRBench %s: %d items kept, %d quarantined", file, len(rows), len(log))
    items = finish_items(rows, log, str(file))
    require_rows(items.height, log, what="3DSRBench", location=path, config_field="threedsrbench_path")
    return items, log


def _threedsr_row(
    record: dict, record_id: str, image_by_index: dict[str, str], rows: list[dict]
) -> str | None:
    options: list[str] = []
    ended = False
    for letter in "ABCDEFGH":
        if letter not in record:
            break
        value = record.get(letter)
        if _missing(value):
            ended = True
            continue
        if ended:
            return f"bad options: option {letter} follows an empty option"
        options.append(str(value))
    if len(options) < 2:
        return f"bad options: {len(options)} options"
    answer = str(record.get("answer") or "").strip()
    if len(answer) != 1 or answer not in LETTERS:
        return f"bad answer: {record.get('answer')!r} is not a bare option letter"
    index = LETTERS.index(answer)
    if index >= len(options):
        return f"answer out of range: {answer} for {len(options)} options"
    question = str(record.get("question") or "").strip()
    if not question:
        return "missing fields: ['question']"
    image_text = str(record.get("image") or "")
    if 0 < len(image_text) <= 64 and image_text in image_by_index:
        image_text = image_by_index[image_text]
    if not image_text:
        return "image: no image"
    try:
        cells = [
            image_cell_from_bytes(data, f"{record_id}_{k}")
            for k, data in enumerate(_decode_base64_images(image_text))
        ]
    except (binascii.Error, json.JSONDecodeError) as error:
        return f"image: bad base64 ({error})"
    except ValueError as error:
        return f"image: {error}"
    if not cells:
        return "image: no image"
    key, flipped, circular = threedsr_variant(str(record.get("qid") or record.get("index")))
    category = str(record.get("category") or "")
    rows.append(
        _item(
            benchmark="3dsrbench",
            item_id=f"3dsrbench/{record_id}",
            images=[cell for cell, _, _ in cells],
            width=cells[0][1],
            height=cells[0][2],
            question=question,
            options=options,
            answer_index=index,
            category=category,
            task_type=threedsr_main_category(category),
            source="3dsrbench",
            split="test",
            question_key=f"3dsrbench/{key}",
            flipped=flipped,
            circular_index=circular,
        )
    )
    return None


# --------------------------------------------------------------------------------------------------
# BLINK
# --------------------------------------------------------------------------------------------------


def _blink_files(location: Path, subsets: Sequence[str]) -> list[tuple[Path, str | None]]:
    if location.is_file():
        return [(location, None)]
    files: list[tuple[Path, str | None]] = []
    for subset in subsets:
        folder = location / subset
        candidates = sorted(folder.glob("val*.parquet")) or sorted(folder.glob("*.parquet"))
        files.extend((file, subset) for file in candidates)
    return files


def load_blink(
    path: str | Path, *, subsets: Sequence[str] = BLINK_SPATIAL_SUBSETS
) -> tuple[pl.DataFrame, QuarantineLog]:
    """BLINK's spatial subsets (default ``Relative_Depth`` and ``Spatial_Relation``) from the HF Parquet layout.

    ``<root>/<Subset>/val-*.parquet`` with ``idx, question, sub_task, image_1..image_4, choices, answer``
    (``"(A)"``); a single Parquet file with a ``sub_task`` column also works. The test split hides its
    answers, so its rows are quarantined.
    """
    location = require_path(path, "blink_path", "BLINK data")
    log = QuarantineLog(QUARANTINE_ASSET)
    rows: list[dict] = []
    files = _blink_files(location, subsets)
    if not files:
        log.add(str(location), f"no Parquet files for subsets {list(subsets)}", source_file=str(location))
    for file, subset in files:
        problem: str | None = column_problem(pl.read_parquet_schema(file), BLINK_COLUMNS)
        if problem:
            log.add(file.name, problem, source_file=str(file))
            continue
        for position, record in enumerate(pl.read_parquet(file).to_dicts()):
            record_id = str(record.get("idx") or f"{subset}#{position}")
            category = str(record.get("sub_task") or subset or "")
            if subset is None and category not in subsets:
                continue
            problem = _blink_row(record, record_id, category, rows)
            if problem:
                log.add(record_id, problem, source_file=str(file), payload=_payload(record))
    logger.info("BLINK %s: %d items kept, %d quarantined", location, len(rows), len(log))
    items = finish_items(rows, log, str(location))
    require_rows(items.height, log, what="BLINK", location=path, config_field="blink_path` / `blink_subsets")
    return items, log


def _blink_row(record: dict, record_id: str, category: str, rows: list[dict]) -> str | None:
    choices = record.get("choices")
    if not isinstance(choices, list) or len(choices) < 2:
        return "bad options: choices must be a list of at least 2"
    options = [str(choice) for choice in choices]
    letter = parenthesized_letter(record.get("answer"))
    if letter is None:
        return f"bad answer: {record.get('answer')!r} is not of the form '(A)' (hidden test answers?)"
    index = LETTERS.index(letter)
    if index >= len(options):
        return f"answer out of range: {letter} for {len(options)} options"
    cells = []
    for k in range(1, 5):
        image = record.get(f"image_{k}")
        if not isinstance(image, dict) or not image.get("bytes"):
            continue
        try:
            cells.append(image_cell_from_bytes(image["bytes"], image.get("path") or f"{record_id}_{k}"))
        except ValueError as error:
            return f"image: {error}"
    if not cells:
        return "image: no image"
    question = str(record.get("question") or "").strip()
    if not question:
        return "missing fields: ['question']"
    rows.append(
        _item(
            benchmark="blink",
            item_id=f"blink/{record_id}",
            images=[cell for cell, _, _ in cells],
            width=cells[0][1],
            height=cells[0][2],
            question=question,
            options=options,
            answer_index=index,
            category=category,
            task_type=category,
            source="blink",
            split="val",
        )
    )
    return None


# --------------------------------------------------------------------------------------------------
# STVQA validation split and held-out DGE tasks (project tables)
# --------------------------------------------------------------------------------------------------


def _first_size(images: list[dict]) -> tuple[int, int]:
    _, width, height = image_cell_from_bytes(images[0]["bytes"], images[0].get("path"))
    return width, height


def _read_split_table(location: Path, required: Sequence[str], log: QuarantineLog) -> pl.DataFrame:
    """The Parquet files at ``location`` as one frame; a file without a ``split`` column gets the split its
    name states (Hub layout ``data/val-00000-of-00001.parquet``); files lacking ``required`` columns are
    quarantined."""
    files = [location] if location.is_file() else sorted(location.rglob("*.parquet"))
    if not files:
        raise MissingInputError(
            f"no Parquet table at {location}: expected a .parquet file or a folder of them"
        )
    frames = []
    for file in files:
        columns = pl.read_parquet_schema(file)
        problem = column_problem(columns, required)
        if problem:
            log.add(file.name, problem, source_file=str(file))
            continue
        frame = pl.read_parquet(file)
        if "split" not in columns:
            frame = frame.with_columns(pl.lit(split_from_file_name(file), dtype=pl.String).alias("split"))
        frames.append(frame)
    return pl.concat(frames, how="diagonal_relaxed") if frames else pl.DataFrame()


def _load_project_table(
    path: str | Path,
    config_field: str,
    what: str,
    split: str,
    id_column: str,
    make_row: Callable[[dict, str, str, list[dict]], str | None],
    required: Sequence[str] = (),
) -> tuple[pl.DataFrame, QuarantineLog]:
    """Read one of the project's own tables (or a published table in its layout), keep ``split`` (all for
    ``"all"``) and turn rows into items.

    ``make_row(record, record_id, split, rows)`` appends an item or returns why the record is bad.
    """
    location = require_path(path, config_field, what)
    log = QuarantineLog(QUARANTINE_ASSET)
    frame = _read_split_table(location, required, log)
    if "split" in frame.columns and split != "all":
        frame = frame.filter(pl.col("split") == split)
    rows: list[dict] = []
    for position, record in enumerate(frame.to_dicts()):
        record_id = str(record.get(id_column) or f"#{position}")
        problem = make_row(record, record_id, split, rows)
        if problem:
            log.add(record_id, problem, source_file=str(location), payload=_payload(record))
    items = finish_items(rows, log, str(location))
    require_rows(items.height, log, what=what, location=path, config_field=config_field)
    return items, log


def load_stvqa(path: str | Path, *, split: str = "val") -> tuple[pl.DataFrame, QuarantineLog]:
    """The STVQA validation split from the ``stvqa`` table; its ground-truth scene gives reference boxes.

    The published STVQA-7K (``data/train-*.parquet``, ``data/val-*.parquet``, one image per row, no
    ``gt_scene``) reads the same way: the split comes from the file name.
    """
    return _load_project_table(
        path, "stvqa_path", "stvqa table", split, "image_id", _stvqa_row, ("images", "options", "answer")
    )


def _stvqa_row(record: dict, record_id: str, split: str, rows: list[dict]) -> str | None:
    options = [str(option) for option in (record.get("options") or [])]
    try:
        letter = gold_option_letter(record.get("answer"), len(options))
    except ValueError as error:
        return f"bad answer: {error}"
    images = record.get("images") or []
    if isinstance(images, dict):  # STVQA-7K on the Hub: one image per row, not a list
        images = [images]
    if not images:
        return "image: no image"
    width, height = record.get("image_width"), record.get("image_height")
    if not width or not height:
        try:
            width, height = _first_size(images)
        except ValueError as error:
            return f"image: {error}"
    scene = record.get("gt_scene")
    if isinstance(scene, str):
        try:
            scene = json.loads(scene)
        except json.JSONDecodeError:
            scene = None
    boxes = []
    for obj in (scene or {}).get("objects") or []:
        box = obj.get("bbox_2d") if isinstance(obj, dict) else None
        if isinstance(box, list) and len(box) == 4 and box[2] > box[0] and box[3] > box[1]:
            boxes.append(
                {
                    "bbox_2d": [int(v) for v in box],
                    "label": scene_object_name(str(obj.get("id", ""))),
                    "validity": 1.0,
                }
            )
    question = str(record.get("question_only") or record.get("question") or "").strip()
    if not question:
        return "missing fields: ['question_only']"
    item_id = f"stvqa/{record_id}/{content_hash(question, 8)}"  # stable across rebuilds of the table
    rows.append(
        _item(
            benchmark="stvqa_val",
            item_id=item_id,
            images=[{"bytes": image["bytes"], "path": image.get("path")} for image in images],
            width=int(width),
            height=int(height),
            question=question,
            options=options,
            answer_index=LETTERS.index(letter),
            category=str(record.get("category") or ""),
            task_type=str(record.get("level") or ""),
            source="stvqa",
            split=split,
            reference_boxes=boxes,
        )
    )
    return None


def load_dge_tasks(path: str | Path, *, split: str = "test") -> tuple[pl.DataFrame, QuarantineLog]:
    """A held-out split of the ``dge_tasks`` table (multiple-choice and numeric items with units)."""
    return _load_project_table(
        path, "dge_tasks_path", "dge_tasks table", split, "task_id", _dge_row, ("images", "options")
    )


def _dge_row(record: dict, record_id: str, split: str, rows: list[dict]) -> str | None:
    images = record.get("images") or []
    if not images:
        return "image: no image"
    try:
        width, height = _first_size(images)
    except ValueError as error:
        return f"image: {error}"
    options = [str(option) for option in (record.get("options") or [])]
    numeric, unit, index = None, None, None
    if options:
        index = record.get("answer_index")
        if index is None or not 0 <= int(index) < len(options):
            return f"answer out of range: index {index} for {len(options)} options"
        index = int(index)
    else:
        numeric = record.get("numeric_answer")
        if numeric is None or not math.isfinite(float(numeric)):
            return "numeric task without a gold value"
        numeric, unit = float(numeric), record.get("unit")
    task_type = str(record.get("task_type") or "")
    rows.append(
        _item(
            benchmark="dge_heldout",
            item_id=f"dge/{record_id}",
            images=[{"bytes": image["bytes"], "path": image.get("path")} for image in images],
            width=width,
            height=height,
            question=str(record.get("question") or ""),
            options=options,
            answer_index=index,
            numeric_answer=numeric,
            unit=unit,
            answer_text=str(record.get("answer") or "") if numeric is not None else None,
            category=task_type,
            task_type=task_type,
            source=str(record.get("geometry_source") or "dge"),
            split=split,
        )
    )
    return None


# --------------------------------------------------------------------------------------------------
# Variants, limits, reference boxes, and the dispatcher
# --------------------------------------------------------------------------------------------------


def make_circular_variants(items: pl.DataFrame) -> pl.DataFrame:
    """Add CircularEval rotations of every multiple-choice item that has none yet.

    Item ``k`` options long gets ``k - 1`` copies whose options are rotated left by ``r`` (the gold
    index follows), ids ``<item_id>#circular<r>`` and ``circular_index = r``. Rotations are
    deterministic (no salted ``hash()`` shuffles); items whose question already has variants
    (3DSRBench ships its own) and items without listed options are left as they are.

    >>> import polars as pl
    >>> from data_contracts.images import encode_image
    >>> from PIL import Image
    >>> row = _item(benchmark="b", item_id="q", images=[encode_image(Image.new("RGB", (2, 2)))], width=2, height=2,
    ...             question="?", options=["x", "y", "z"], answer_index=2, category="c", task_type="t",
    ...             source="s", split="test")
    >>> rotated = make_circular_variants(finish_items([row], QuarantineLog("eval_items")))
    >>> rotated.select("item_id", "options", "answer").rows()
    [('q', ['x', 'y', 'z'], 'C'), ('q#circular1', ['y', 'z', 'x'], 'B'), ('q#circular2', ['z', 'x', 'y'], 'A')]
    """
    if items.height == 0:
        return items
    has_variants = set(
        items.filter(pl.col("circular_index") > 0).select("benchmark", "question_key").unique().iter_rows()
    )
    rows = []
    for row in items.iter_rows(named=True):
        rows.append(row)
        count = len(row["options"])
        if (
            row["answer_format"] != "choice"
            or count < 2
            or (row["benchmark"], row["question_key"]) in has_variants
        ):
            continue
        for shift in range(1, count):
            rotated = dict(row)
            rotated["options"] = row["options"][shift:] + row["options"][:shift]
            rotated["answer_index"] = (row["answer_index"] - shift) % count
            rotated["answer"] = LETTERS[rotated["answer_index"]]
            rotated["item_id"] = f"{row['item_id']}#circular{shift}"
            rotated["circular_index"] = shift
            rows.append(rotated)
    return pl.DataFrame(rows, schema=items.schema)


def limit_items(items: pl.DataFrame, limit: int | None) -> pl.DataFrame:
    """The items of the first ``limit`` questions of each benchmark (variants of a question stay together).

    >>> frame = pl.DataFrame({"benchmark": ["a"] * 3, "question_key": ["q1", "q1", "q2"], "item_id": ["1", "2", "3"]})
    >>> limit_items(frame, 1)["item_id"].to_list()
    ['1', '2']
    """
    if limit is None or items.height == 0:
        return items
    keys = (
        items.select("benchmark", "question_key")
        .unique(maintain_order=True)
        .group_by("benchmark", maintain_order=True)
        .head(limit)
    )
    return items.join(keys, on=["benchmark", "question_key"], how="semi", maintain_order="left")


def attach_reference_boxes(
    items: pl.DataFrame, pseudo_gt: pl.DataFrame, *, id_column: str = "question_id"
) -> pl.DataFrame:
    """Give items without reference boxes the pseudo-GT boxes of a table with ``(question_id, pseudo_gt)``.

    ``pseudo_gt`` is the ``spatialcore_train`` column: ``list[struct{bbox_2d, label, validity}]`` on the grid.
    """
    if items.height == 0 or pseudo_gt.height == 0:
        return items
    box_type = polars_schema(EvalItems)["reference_boxes"]
    boxes = pseudo_gt.select(
        pl.col(id_column).alias("item_id"), pl.col("pseudo_gt").cast(box_type).alias("_pseudo_gt")
    ).unique(subset="item_id", keep="first")
    joined = items.join(boxes, on="item_id", how="left", maintain_order="left")
    return joined.with_columns(
        pl.when(pl.col("reference_boxes").list.len() == 0)
        .then(pl.col("_pseudo_gt").fill_null(pl.lit([], dtype=box_type)))
        .otherwise(pl.col("reference_boxes"))
        .alias("reference_boxes")
    ).drop("_pseudo_gt")


class BenchmarkLocations(BaseModel):
    """Where each benchmark's native files are (also the fields of the ``eval_items`` run config).

    Every location is a local path or a Hub dataset (``hf://datasets/OWNER/NAME[@REVISION][/PATH]``);
    empty fields fall back to the storage root.
    """

    omnispatial_root: str | None = Field(
        default=None, description="OmniSpatial folder; default <storage root>/sample_world/omnispatial."
    )
    omnispatial_split: Literal["all", "test", "train"] | None = Field(
        default=None,
        description="all, test or train (hash split); default all for a given folder, test for the sample world.",
    )
    spatialab_path: str | None = Field(
        default=None, description="SpatiaLab table or folder; default the sample world's."
    )
    spatialab_images_dir: str | None = Field(
        default=None, description="SpatiaLab images; default img/ or images/ beside the table."
    )
    cvbench_path: str | None = Field(default=None, description="CV-Bench folder or Parquet file.")
    threedsrbench_path: str | None = Field(
        default=None, description="3DSRBench VLMEvalKit TSV (or its folder)."
    )
    blink_path: str | None = Field(default=None, description="BLINK folder (<Subset>/val-*.parquet).")
    blink_subsets: list[str] = Field(
        default_factory=lambda: list(BLINK_SPATIAL_SUBSETS), description="BLINK subsets to read."
    )
    stvqa_path: str | None = Field(default=None, description="The stvqa table; default <storage root>/stvqa.")
    stvqa_split: str = Field(default="val", description="The STVQA split to evaluate.")
    dge_tasks_path: str | None = Field(
        default=None, description="The dge_tasks table; default <storage root>/dge_tasks."
    )
    dge_split: str = Field(default="test", description="The held-out DGE split.")
    pseudo_gt_path: str | None = Field(
        default=None,
        description="A table with question_id and pseudo_gt (e.g. spatialcore_train) whose boxes become "
        "reference boxes for the grounding analysis.",
    )
    circular: bool = Field(default=False, description="Add CircularEval rotations to multiple-choice items.")


class BenchmarkSources(BenchmarkLocations):
    """The benchmark locations and the storage root they fall back to."""

    storage_root: str | None = Field(
        default=None,
        description="Storage root of the default sources and tables; default $SPATIAL_DATA_ROOT, "
        "$DAGSTER_HOME/spatial_data or ./data.",
    )

    def root(self, tables: Iterable[str] = ()) -> Path:
        """The storage root; a Hub one (``hf://datasets/OWNER/NAME[@REV]``, a repo ``spatial-publish`` wrote) as
        its snapshot in the Hub cache holding ``tables`` (see :mod:`training.hub_data`)."""
        from data_contracts.storage import default_storage_root
        from training.hub_data import resolve_data_root

        if self.storage_root and parse_hub_location(self.storage_root) is not None:
            return resolve_data_root(self.storage_root, tables)
        return Path(self.storage_root) if self.storage_root else Path(default_storage_root())

    def with_locations(self, locations: dict[str, str]) -> BenchmarkSources:
        """A copy whose location fields are set from ``{benchmark name: location}`` (see :func:`split_benchmark_locations`).

        >>> BenchmarkSources().with_locations({"cvbench": "hf://datasets/nyu-visionx/CV-Bench"}).cvbench_path
        'hf://datasets/nyu-visionx/CV-Bench'
        """
        return self.model_copy(
            update={BENCHMARK_LOCATION_FIELDS[name]: location for name, location in locations.items()}
        )


def split_benchmark_locations(spec: Iterable[str] | str) -> tuple[list[str], dict[str, str]]:
    """Benchmark names and per-benchmark locations from ``name`` / ``name=LOCATION`` entries.

    A location is a local path or a Hub dataset (``hf://datasets/OWNER/NAME[@REVISION][/PATH]``); it
    goes to the benchmark's field of :class:`BenchmarkSources` (:meth:`BenchmarkSources.with_locations`).

    >>> split_benchmark_locations("cv-bench=hf://datasets/nyu-visionx/CV-Bench@main,omnispatial")
    (['cvbench', 'omnispatial'], {'cvbench': 'hf://datasets/nyu-visionx/CV-Bench@main'})
    """
    entries = spec.split(",") if isinstance(spec, str) else list(spec)
    names: list[str] = []
    locations: dict[str, str] = {}
    for entry in entries:
        name, has_location, location = entry.strip().partition("=")
        if not name.strip():
            continue
        if has_location and name.strip().lower() == "all":
            raise ValueError(f"benchmark entry {entry.strip()!r}: 'all' takes no location")
        for canonical in normalize_benchmark_names([name]):
            if canonical not in names:
                names.append(canonical)
            if has_location:
                if not location.strip():
                    raise ValueError(f"benchmark entry {entry.strip()!r} has an empty location after '='")
                locations[canonical] = location.strip()
    return names, locations


def normalize_benchmark_names(names: Iterable[str] | str) -> list[str]:
    """Canonical benchmark names from user input (comma-separated or a list; ``all`` for every one).

    >>> normalize_benchmark_names("omnispatial, CV-Bench,stvqa")
    ['omnispatial', 'cvbench', 'stvqa_val']
    """
    if isinstance(names, str):
        names = list(names.split(","))
    result: list[str] = []
    for name in names:
        key = name.strip().lower()
        if not key:
            continue
        if key == "all":
            return list(BENCHMARK_NAMES)
        if key not in BENCHMARK_ALIASES:
            raise ValueError(f"unknown benchmark {name.strip()!r}; known: {', '.join(BENCHMARK_NAMES)}")
        canonical = BENCHMARK_ALIASES[key]
        if canonical not in result:
            result.append(canonical)
    return result


def load_benchmark(name: str, sources: BenchmarkSources) -> tuple[pl.DataFrame, QuarantineLog]:
    """Load one benchmark by name from ``sources``.

    Raises:
        `MissingInputError`: when the benchmark's files are not where ``sources`` says.
    """
    frame, log = _load_benchmark_rows(name, sources)
    return frame.with_columns(origin=pl.lit(benchmark_origin(name, sources), dtype=pl.String)), log


def benchmark_origin(name: str, sources: BenchmarkSources) -> str:
    """Whether benchmark ``name`` read from ``sources`` is the sample world's or a real data set.

    OmniSpatial and SpatiaLab fall back to the sample world when no location is set; the graph's own
    tables (``stvqa_val``, ``dge_heldout``) have the origin of the source table they were built from
    (``scene_graphs`` / ``rgbd_scenes`` in the same storage root); the other benchmarks are always real.

    >>> benchmark_origin("omnispatial", BenchmarkSources(storage_root="/nowhere"))
    'sample_world'
    >>> benchmark_origin("cvbench", BenchmarkSources(storage_root="/nowhere", cvbench_path="/cv"))
    'real'
    """
    if name == "omnispatial":
        return REAL if sources.omnispatial_root else SAMPLE_WORLD
    if name == "spatialab":
        return REAL if sources.spatialab_path else SAMPLE_WORLD
    if name in ("stvqa_val", "dge_heldout"):
        table, location, source_table = (
            ("stvqa", sources.stvqa_path, "scene_graphs")
            if name == "stvqa_val"
            else ("dge_tasks", sources.dge_tasks_path, "rgbd_scenes")
        )
        return _graph_table_origin(
            Path(location) if location else _table_location(sources.root([table]), table), source_table
        )
    return REAL


def _graph_table_origin(location: Path, source_table: str) -> str:
    """The origin of a table the graph built: its own ``origin`` column (a published table's), else that of the
    source table beside it (``real`` when neither is there)."""
    files = (
        [location] if location.is_file() else sorted(location.glob("*.parquet")) if location.is_dir() else []
    )
    if files and all("origin" in pl.read_parquet_schema(file) for file in files):
        origins = set()
        for file in files:
            origins.update(pl.read_parquet(file, columns=["origin"])["origin"].unique().to_list())
        return SAMPLE_WORLD if origins == {SAMPLE_WORLD} else REAL
    source = location.parent / f"{source_table}.parquet"
    if not source.is_file() or "origin" not in pl.read_parquet_schema(source):
        logger.warning(
            "%s has no %s with an origin beside it: its items are taken as real", location, source.name
        )
        return REAL
    source_origins = pl.read_parquet(source, columns=["origin"])["origin"].unique().to_list()
    return SAMPLE_WORLD if source_origins == [SAMPLE_WORLD] else REAL


_GRAPH_TABLES = {"stvqa_val": ("stvqa",), "dge_heldout": ("dge_tasks",)}


def _load_benchmark_rows(name: str, sources: BenchmarkSources) -> tuple[pl.DataFrame, QuarantineLog]:
    root = sources.root(_GRAPH_TABLES.get(name, ()))
    if name == "omnispatial":
        folder = sources.omnispatial_root or root / "sample_world" / "omnispatial"
        split = sources.omnispatial_split or ("all" if sources.omnispatial_root else "test")
        return load_omnispatial(folder, split=split)
    if name == "spatialab":
        path = sources.spatialab_path or root / "sample_world" / "spatialab" / "spatialab.json"
        return load_spatialab(path, images_dir=sources.spatialab_images_dir)
    if name == "cvbench":
        return load_cvbench(_required(sources.cvbench_path, "cvbench_path", "CV-Bench"))
    if name == "3dsrbench":
        return load_3dsrbench(_required(sources.threedsrbench_path, "threedsrbench_path", "3DSRBench"))
    if name == "blink":
        return load_blink(_required(sources.blink_path, "blink_path", "BLINK"), subsets=sources.blink_subsets)
    if name == "stvqa_val":
        return load_stvqa(sources.stvqa_path or _table_location(root, "stvqa"), split=sources.stvqa_split)
    if name == "dge_heldout":
        return load_dge_tasks(
            sources.dge_tasks_path or _table_location(root, "dge_tasks"), split=sources.dge_split
        )
    raise ValueError(f"unknown benchmark {name!r}; known: {', '.join(BENCHMARK_NAMES)}")


def _required(value: str | None, field_name: str, what: str) -> str:
    if not value:
        raise MissingInputError(f"{what} has no default location: set `{field_name}` to its local copy.")
    return value


def _table_location(root: Path, table: str) -> Path:
    single = root / f"{table}.parquet"
    return single if single.exists() else root / table


def load_benchmarks(names: Iterable[str], sources: BenchmarkSources) -> tuple[pl.DataFrame, QuarantineLog]:
    """Load several benchmarks into one frame, with circular variants and pseudo-GT boxes as configured."""
    frames, log = [], QuarantineLog(QUARANTINE_ASSET)
    for name in normalize_benchmark_names(list(names)):
        frame, benchmark_log = load_benchmark(name, sources)
        frames.append(frame)
        log.extend(benchmark_log)
    items = pl.concat(frames) if frames else pl.DataFrame(schema=polars_schema(EvalItems))
    origins = items.group_by("origin").agg(pl.col("benchmark").unique().sort()).sort("origin")
    if origins.height > 1:
        logger.warning(
            "these items mix the sample world's and real data sets: %s",
            "; ".join(
                f"{row['origin']}: {', '.join(row['benchmark'])}" for row in origins.iter_rows(named=True)
            ),
        )
    if sources.circular:
        items = make_circular_variants(items)
    if sources.pseudo_gt_path:
        items = attach_reference_boxes(items, read_parquet_table(sources.pseudo_gt_path))
    return items, log
