"""Readers for the raw input formats: OmniSpatial, SpatiaLab, Visual Genome (raw JSON and VG150), ScanNet.

Each reader takes paths, returns a polars frame under its contract plus a
:class:`~data_contracts.quarantine.QuarantineLog` of the records it rejected, and never lets one bad
record stop the others. A missing input folder is the only thing that raises
(:class:`MissingInputError`, one sentence naming the path and the config field).

The format facts these readers rely on are listed in the project's format notes: OmniSpatial's
``answer`` is a 0-based index and its images live at ``<root>/<task_type>/<id prefix>.<ext>``;
SpatiaLab's ``Answer`` is 1-based; Visual Genome boxes are top-left ``x, y, w, h`` in pixels and its
relationship endpoints come as ``name`` or ``names`` dicts; ScanNet frame names are not zero-padded.
"""

from __future__ import annotations

import csv
import io
import json
import logging
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
from PIL import Image, UnidentifiedImageError

from data_contracts import mcq_questions, rgbd_frames, rgbd_scenes, scene_graphs
from data_contracts.boxes import BoxError, cxcywh_to_xyxy, pixels_to_grid, xywh_to_xyxy
from data_contracts.images import ImageDecodeError, read_image_file
from data_contracts.quarantine import QuarantineLog
from data_contracts.stable_hash import stable_split
from data_contracts.validation import polars_schema

logger = logging.getLogger(__name__)

LETTERS = mcq_questions.LETTERS
IMAGE_EXTENSIONS = (".png", ".jpg", ".jpeg", ".webp", ".bmp", ".gif")
RIGID_TOLERANCE = 1e-3


class MissingInputError(FileNotFoundError):
    """A configured input folder or file does not exist."""


def require_path(path: str | Path | None, config_field: str, what: str) -> Path:
    """Return ``path`` as a ``Path`` or raise :class:`MissingInputError` naming it and its config field."""
    if path is None or not Path(path).exists():
        raise MissingInputError(
            f"{what} not found at {path!s}: set the config field `{config_field}` to an existing path."
        )
    return Path(path)


class _ImageCache:
    """Reads each image file once (several questions share an image)."""

    def __init__(self) -> None:
        self._cells: dict[Path, tuple[dict, int, int]] = {}
        self._errors: dict[Path, str] = {}

    def get(self, path: Path) -> tuple[dict, int, int]:
        if path in self._errors:
            raise ImageDecodeError(self._errors[path])
        if path not in self._cells:
            try:
                self._cells[path] = read_image_file(path)
            except ImageDecodeError as error:
                self._errors[path] = str(error)
                raise
        return self._cells[path]


def _image_problem(
    cache: _ImageCache, path: Path | None, record_id: str
) -> tuple[tuple[dict, int, int] | None, str]:
    if path is None or not path.exists():
        return None, f"missing image: {path if path is not None else 'no file for ' + record_id}"
    try:
        return cache.get(path), ""
    except ImageDecodeError as error:
        return None, f"corrupt image: {error}"


def _load_json(path: Path, log: QuarantineLog) -> Any | None:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as error:
        log.add(path.name, f"malformed JSON: {error}", source_file=str(path))
        return None
    except UnicodeDecodeError as error:
        log.add(path.name, f"malformed JSON: not UTF-8 ({error})", source_file=str(path))
        return None


# --------------------------------------------------------------------------------------------------
# OmniSpatial and SpatiaLab
# --------------------------------------------------------------------------------------------------


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
    records = _load_json(data_file, log)
    if records is None:
        return pl.DataFrame(schema=polars_schema(mcq_questions.McqQuestions)), log
    if not isinstance(records, list):
        log.add(
            data_file.name, "malformed JSON: top level is not a list of questions", source_file=str(data_file)
        )
        return pl.DataFrame(schema=polars_schema(mcq_questions.McqQuestions)), log
    cache = _ImageCache()
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
        image, problem = _image_problem(cache, image_path, record_id)
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
        data = _load_json(path, log)
        if data is None:
            return None
        if isinstance(data, dict):
            data = data.get("data") or data.get("rows") or list(data.values())
        return data if isinstance(data, list) else None
    if suffix == ".jsonl":
        records = []
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            if not line.strip():
                continue
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError as error:
                log.add(f"line {number}", f"malformed JSON: {error}", source_file=str(path))
        return records
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
    cache = _ImageCache()
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
        image, problem = _image_problem(cache, image_path, record_id)
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

VG_IMAGE_FOLDERS = ("VG_100K", "VG_100K_2", "images", ".")


def _vg_image_path(root: Path, image_id: str, url: str | None) -> Path | None:
    names = [f"{image_id}.jpg", f"{image_id}.png"]
    if url:
        names.insert(0, url.rstrip("/").rsplit("/", 1)[-1])
    for folder in VG_IMAGE_FOLDERS:
        for name in names:
            candidate = root / folder / name
            if candidate.exists():
                return candidate
    return None


def _object_name(obj: dict) -> str:
    if isinstance(obj.get("names"), list) and obj["names"]:
        return str(obj["names"][0]).strip().lower()
    return str(obj.get("name", "")).strip().lower()


def _by_image(items: Any) -> dict[str, dict]:
    if not isinstance(items, list):
        return {}
    return {str(item.get("image_id", item.get("id"))): item for item in items if isinstance(item, dict)}


def read_visual_genome(
    root: str | Path, *, source: str = "visual_genome", config_field: str = "visual_genome_root"
) -> tuple[pl.DataFrame, QuarantineLog]:
    """Read raw Visual Genome v1.4 JSON (``image_data``, ``objects``, ``relationships``, ``attributes``)."""
    folder = require_path(root, config_field, "Visual Genome folder")
    log = QuarantineLog("scene_graphs")
    files = {}
    for name in ("image_data", "objects", "relationships", "attributes"):
        path = folder / f"{name}.json"
        if name in ("image_data", "objects") and not path.exists():
            raise MissingInputError(f"Visual Genome {path.name} not found in {folder}: set `{config_field}`.")
        files[name] = _load_json(path, log) if path.exists() else []
    if files["image_data"] is None or files["objects"] is None:
        return pl.DataFrame(schema=polars_schema(scene_graphs.SceneGraphs)), log
    objects_by_image = _by_image(files["objects"])
    relations_by_image = _by_image(files["relationships"] or [])
    attributes_by_image = _by_image(files["attributes"] or [])
    cache = _ImageCache()
    rows = []
    for info in files["image_data"]:
        if not isinstance(info, dict) or "image_id" not in info and "id" not in info:
            log.add("?", "malformed record: image_data entry without image_id", payload=info)
            continue
        image_id = str(info.get("image_id", info.get("id")))
        image_path = _vg_image_path(folder, image_id, info.get("url"))
        image, problem = _image_problem(cache, image_path, image_id)
        if image is None:
            log.add(image_id, problem, source_file=str(image_path or folder / "image_data.json"))
            continue
        cell, file_width, file_height = image
        width = int(info.get("width") or file_width)
        height = int(info.get("height") or file_height)
        row = _vg_scene(
            image_id,
            width,
            height,
            objects_by_image.get(image_id, {}).get("objects", []),
            relations_by_image.get(image_id, {}).get("relationships", []),
            attributes_by_image.get(image_id, {}).get("attributes", []),
            log,
            folder,
        )
        row.update({"image": cell, "source": source})
        rows.append(row)
    logger.info("Visual Genome %s: %d images kept, %d records quarantined", folder, len(rows), len(log))
    return pl.DataFrame(rows, schema=polars_schema(scene_graphs.SceneGraphs)), log


def _vg_scene(
    image_id: str,
    width: int,
    height: int,
    objects: list,
    relationships: list,
    attributes: list,
    log: QuarantineLog,
    folder: Path,
) -> dict:
    kept: dict[str, dict] = {}
    alias: dict[str, str] = {}
    for obj in objects or []:
        if not isinstance(obj, dict) or "object_id" not in obj:
            log.add(
                f"{image_id}/?",
                "malformed object: no object_id",
                source_file=str(folder / "objects.json"),
                payload=obj,
            )
            continue
        object_id = str(obj["object_id"])
        name = _object_name(obj)
        try:
            box_px = xywh_to_xyxy([obj["x"], obj["y"], obj["w"], obj["h"]])
            box = pixels_to_grid(box_px, width, height)
        except (KeyError, TypeError, ValueError, BoxError) as error:
            log.add(
                f"{image_id}/{object_id}",
                f"bad box: {error}",
                source_file=str(folder / "objects.json"),
                payload=obj,
            )
            continue
        if not name:
            log.add(
                f"{image_id}/{object_id}",
                "bad object: no name",
                source_file=str(folder / "objects.json"),
                payload=obj,
            )
            continue
        clipped = [
            max(0.0, box_px[0]),
            max(0.0, box_px[1]),
            min(float(width), box_px[2]),
            min(float(height), box_px[3]),
        ]
        names = [str(n).strip().lower() for n in obj.get("names", [name]) if str(n).strip()]
        kept[object_id] = {
            "object_id": object_id,
            "name": name,
            "names": names or [name],
            "attributes": [],
            "bbox": box,
            "bbox_px": clipped,
        }
        alias[object_id] = object_id
        for merged in obj.get("merged_object_ids", []) or []:
            alias.setdefault(str(merged), object_id)
    for entry in attributes or []:
        if not isinstance(entry, dict):
            continue
        target = alias.get(str(entry.get("object_id")))
        if target is None:
            for merged in entry.get("merged_object_ids", []) or []:
                target = alias.get(str(merged))
                if target:
                    break
        if target is None:
            continue
        for attribute in entry.get("attributes") or []:
            text = str(attribute).strip().lower()
            if text and text not in kept[target]["attributes"]:
                kept[target]["attributes"].append(text)
    relations = []
    for relation in relationships or []:
        relation_id = (
            f"{image_id}/rel{relation.get('relationship_id', '?') if isinstance(relation, dict) else '?'}"
        )
        if not isinstance(relation, dict):
            log.add(
                relation_id,
                "malformed relation",
                source_file=str(folder / "relationships.json"),
                payload=relation,
            )
            continue
        subject = relation.get("subject") or {}
        obj = relation.get("object") or {}
        subject_id = alias.get(str(subject.get("object_id")))
        object_id = alias.get(str(obj.get("object_id")))
        predicate = str(relation.get("predicate", "")).strip().lower()
        if subject_id is None or object_id is None:
            log.add(
                relation_id,
                "dangling relation: subject or object is not a kept object of the image",
                source_file=str(folder / "relationships.json"),
                payload=relation,
            )
            continue
        if not predicate:
            log.add(
                relation_id,
                "bad relation: empty predicate",
                source_file=str(folder / "relationships.json"),
                payload=relation,
            )
            continue
        relations.append({"subject_id": subject_id, "predicate": predicate, "object_id": object_id})
    return {
        "image_id": image_id,
        "image_width": width,
        "image_height": height,
        "objects": list(kept.values()),
        "relationships": relations,
    }


VG150_H5 = "VG-SGG-with-attri.h5"
VG150_DICTS = "VG-SGG-dicts-with-attri.json"
VG150_CORRUPTED_IMAGES = frozenset({"1592", "1722", "4616", "4617"})


def read_vg150(
    root: str | Path,
    *,
    box_scale: int = 1024,
    source: str = "vg150",
    config_field: str = "visual_genome_root",
) -> tuple[pl.DataFrame, QuarantineLog]:
    """Read the VG150 scene-graph split (``VG-SGG-with-attri.h5`` + dicts + ``image_data.json``).

    Boxes in the h5 file are centre x, centre y, width, height scaled so the longer image side is
    ``box_scale`` (1024 in the common release; the dataset ``boxes_512`` is used when asked for 512).
    Rows of the h5 file align with ``image_data.json`` after dropping the known corrupted images.
    """
    import h5py

    folder = require_path(root, config_field, "VG150 folder")
    log = QuarantineLog("scene_graphs")
    dicts = _load_json(require_path(folder / VG150_DICTS, config_field, "VG150 dictionary"), log)
    image_data = _load_json(
        require_path(folder / "image_data.json", config_field, "VG150 image_data.json"), log
    )
    if dicts is None or image_data is None:
        return pl.DataFrame(schema=polars_schema(scene_graphs.SceneGraphs)), log
    image_data = [
        info for info in image_data if str(info.get("image_id", info.get("id"))) not in VG150_CORRUPTED_IMAGES
    ]
    label_names = {int(k): v for k, v in dicts.get("idx_to_label", {}).items()}
    predicate_names = {int(k): v for k, v in dicts.get("idx_to_predicate", {}).items()}
    attribute_names = {int(k): v for k, v in dicts.get("idx_to_attribute", {}).items()}
    cache = _ImageCache()
    rows = []
    with h5py.File(require_path(folder / VG150_H5, config_field, "VG150 h5 file"), "r") as h5:
        boxes = h5[f"boxes_{box_scale}"][:]
        labels = h5["labels"][:].reshape(-1)
        attributes = h5["attributes"][:] if "attributes" in h5 else np.zeros((len(labels), 0), dtype=int)
        first_box, last_box = h5["img_to_first_box"][:], h5["img_to_last_box"][:]
        first_rel, last_rel = h5["img_to_first_rel"][:], h5["img_to_last_rel"][:]
        relationships = h5["relationships"][:]
        predicates = h5["predicates"][:].reshape(-1)
        if len(first_box) != len(image_data):
            log.add(
                "vg150",
                f"misaligned: {len(first_box)} h5 rows vs {len(image_data)} images after dropping corrupted ones",
                source_file=str(folder / VG150_H5),
            )
        for index, info in enumerate(image_data[: len(first_box)]):
            image_id = str(info.get("image_id", info.get("id")))
            image_path = _vg_image_path(folder, image_id, info.get("url"))
            image, problem = _image_problem(cache, image_path, image_id)
            if image is None:
                log.add(image_id, problem, source_file=str(image_path or folder))
                continue
            cell, file_width, file_height = image
            width, height = int(info.get("width") or file_width), int(info.get("height") or file_height)
            scale = max(width, height) / box_scale
            objects: dict[int, dict] = {}
            if first_box[index] >= 0:
                for box_index in range(int(first_box[index]), int(last_box[index]) + 1):
                    object_id = f"{label_names.get(int(labels[box_index]), 'object')}.{box_index - int(first_box[index]) + 1}"
                    try:
                        box_px = [v * scale for v in cxcywh_to_xyxy(boxes[box_index].tolist())]
                        box = pixels_to_grid(box_px, width, height)
                    except BoxError as error:
                        log.add(
                            f"{image_id}/{object_id}", f"bad box: {error}", source_file=str(folder / VG150_H5)
                        )
                        continue
                    name = label_names.get(int(labels[box_index]), "object")
                    objects[box_index] = {
                        "object_id": object_id,
                        "name": name,
                        "names": [name],
                        "attributes": [
                            attribute_names[a] for a in attributes[box_index].tolist() if a in attribute_names
                        ],
                        "bbox": box,
                        "bbox_px": [
                            max(0.0, box_px[0]),
                            max(0.0, box_px[1]),
                            min(width, box_px[2]),
                            min(height, box_px[3]),
                        ],
                    }
            relations = []
            if first_rel[index] >= 0:
                for rel_index in range(int(first_rel[index]), int(last_rel[index]) + 1):
                    subject_index, object_index = (int(v) for v in relationships[rel_index])
                    if subject_index not in objects or object_index not in objects:
                        log.add(
                            f"{image_id}/rel{rel_index}", "dangling relation: box was dropped or out of range"
                        )
                        continue
                    relations.append(
                        {
                            "subject_id": objects[subject_index]["object_id"],
                            "predicate": predicate_names.get(int(predicates[rel_index]), "related to"),
                            "object_id": objects[object_index]["object_id"],
                        }
                    )
            rows.append(
                {
                    "image_id": image_id,
                    "image": cell,
                    "image_width": width,
                    "image_height": height,
                    "objects": list(objects.values()),
                    "relationships": relations,
                    "source": source,
                }
            )
    return pl.DataFrame(rows, schema=polars_schema(scene_graphs.SceneGraphs)), log


def read_scene_graph_parquet(
    path: str | Path, *, source: str = "vg150_prompt", config_field: str = "visual_genome_root"
) -> tuple[pl.DataFrame, QuarantineLog]:
    """Read the prompt-style VG150 variant: ``image_id, image, objects, relationships`` with JSON strings.

    Objects are ``{"id": "name.N", "bbox": [x1, y1, x2, y2]}`` in pixels; relationships are
    ``{"subject": id, "predicate": str, "object": id}``.
    """
    table = require_path(path, config_field, "scene-graph Parquet file")
    log = QuarantineLog("scene_graphs")
    rows = []
    for record in pl.read_parquet(table).iter_rows(named=True):
        image_id = str(record.get("image_id"))
        cell = record.get("image") or {}
        try:
            with Image.open(io.BytesIO(cell.get("bytes") or b"")) as image:
                width, height = image.size
        except (UnidentifiedImageError, OSError) as error:
            log.add(image_id, f"corrupt image: {error}", source_file=str(table))
            continue
        try:
            objects = (
                json.loads(record["objects"]) if isinstance(record["objects"], str) else record["objects"]
            )
            relationships = (
                json.loads(record["relationships"])
                if isinstance(record["relationships"], str)
                else record["relationships"]
            )
        except (json.JSONDecodeError, KeyError, TypeError) as error:
            log.add(image_id, f"malformed JSON: {error}", source_file=str(table))
            continue
        kept = {}
        for obj in objects or []:
            object_id = str(obj.get("id", ""))
            try:
                box = pixels_to_grid(obj["bbox"], width, height)
            except (KeyError, TypeError, BoxError) as error:
                log.add(f"{image_id}/{object_id}", f"bad box: {error}", source_file=str(table), payload=obj)
                continue
            name = re.sub(r"\.\d+$", "", object_id)
            kept[object_id] = {
                "object_id": object_id,
                "name": name,
                "names": [name],
                "attributes": [],
                "bbox": box,
                "bbox_px": [float(v) for v in obj["bbox"]],
            }
        relations = []
        for relation in relationships or []:
            subject, obj = str(relation.get("subject", "")), str(relation.get("object", ""))
            if subject not in kept or obj not in kept:
                log.add(
                    f"{image_id}/{subject}-{obj}",
                    "dangling relation",
                    source_file=str(table),
                    payload=relation,
                )
                continue
            relations.append(
                {"subject_id": subject, "predicate": str(relation.get("predicate", "")), "object_id": obj}
            )
        rows.append(
            {
                "image_id": image_id,
                "image": {"bytes": cell.get("bytes"), "path": cell.get("path")},
                "image_width": width,
                "image_height": height,
                "objects": list(kept.values()),
                "relationships": relations,
                "source": source,
            }
        )
    return pl.DataFrame(rows, schema=polars_schema(scene_graphs.SceneGraphs)), log


def detect_scene_graph_layout(root: Path) -> str:
    """``"vg150"`` when the VG150 h5 file is present, ``"parquet"`` for a Parquet file, else ``"raw"``."""
    if root.is_file() and root.suffix == ".parquet":
        return "parquet"
    if (root / VG150_H5).exists():
        return "vg150"
    return "raw"


# --------------------------------------------------------------------------------------------------
# ScanNet
# --------------------------------------------------------------------------------------------------


def read_matrix(path: Path, size: int) -> np.ndarray:
    """Read a whitespace-separated ``size`` x ``size`` matrix (ScanNet pose and intrinsic files)."""
    values = np.array(path.read_text().split(), dtype=np.float64)
    if values.size != size * size:
        raise ValueError(f"{path} has {values.size} numbers, expected {size * size}")
    return values.reshape(size, size)


def rigid_transform_problem(pose: np.ndarray) -> str:
    """Empty string when ``pose`` is a finite rigid 4x4 transform, else why it is not."""
    if pose.shape != (4, 4):
        return f"pose has shape {pose.shape}, expected 4x4"
    if not np.all(np.isfinite(pose)):
        return "pose is not finite (ScanNet marks invalid poses with -inf)"
    rotation = pose[:3, :3]
    if not np.allclose(rotation.T @ rotation, np.eye(3), atol=RIGID_TOLERANCE):
        return "pose is not rigid: rotation part is not orthonormal"
    if abs(np.linalg.det(rotation) - 1.0) > RIGID_TOLERANCE:
        return "pose is not rigid: rotation has determinant != 1"
    if not np.allclose(pose[3], [0, 0, 0, 1], atol=1e-6):
        return "pose is not rigid: last row is not [0, 0, 0, 1]"
    return ""


@dataclass
class ScanNetTables:
    """What :func:`read_scannet` returns."""

    frames: pl.DataFrame
    scenes: pl.DataFrame
    quarantine: QuarantineLog


def _numeric_frames(folder: Path, suffixes: Iterable[str]) -> dict[int, Path]:
    found: dict[int, Path] = {}
    if not folder.is_dir():
        return found
    for path in folder.iterdir():
        if path.suffix.lower() in suffixes and path.stem.isdigit():
            found[int(path.stem)] = path
    return found


def _image_size(path: Path) -> tuple[int, int]:
    with Image.open(path) as image:
        return image.size


def read_scannet_scene(
    scene_dir: Path, *, source: str = "scannet", depth_scale: float = 1000.0
) -> tuple[list[dict], dict | None, QuarantineLog]:
    """Read one ScanNet-style scene folder into frame rows and a scene row (None when unusable)."""
    scene_id = scene_dir.name
    log = QuarantineLog("rgbd_frames")
    try:
        color_k = read_matrix(scene_dir / "intrinsic" / "intrinsic_color.txt", 4)[:3, :3]
        depth_k = read_matrix(scene_dir / "intrinsic" / "intrinsic_depth.txt", 4)[:3, :3]
    except (FileNotFoundError, ValueError) as error:
        log.add(scene_id, f"bad intrinsics: {error}", source_file=str(scene_dir / "intrinsic"))
        return [], None, log
    colors = _numeric_frames(scene_dir / "color", (".jpg", ".jpeg", ".png"))
    depths = _numeric_frames(scene_dir / "depth", (".png",))
    poses = _numeric_frames(scene_dir / "pose", (".txt",))
    instances = _numeric_frames(scene_dir / "instance-filt", (".png",))
    frames = []
    sizes: dict[str, tuple[int, int]] = {}
    for index in sorted(colors):
        record_id = f"{scene_id}/{index}"
        if index not in depths or index not in poses:
            log.add(
                record_id, "missing file: frame lacks its depth or pose file", source_file=str(colors[index])
            )
            continue
        try:
            pose = read_matrix(poses[index], 4)
        except ValueError as error:
            log.add(record_id, f"bad pose: {error}", source_file=str(poses[index]))
            continue
        problem = rigid_transform_problem(pose)
        if problem:
            log.add(record_id, problem, source_file=str(poses[index]), payload=pose.tolist())
            continue
        try:
            color_size = _image_size(colors[index])
            depth_size = _image_size(depths[index])
        except (UnidentifiedImageError, OSError) as error:
            log.add(record_id, f"corrupt image: {error}", source_file=str(colors[index]))
            continue
        if sizes and (sizes["color"] != color_size or sizes["depth"] != depth_size):
            log.add(
                record_id, "image size differs from the scene's other frames", source_file=str(colors[index])
            )
            continue
        sizes = {"color": color_size, "depth": depth_size}
        frames.append(
            {
                "scene_id": scene_id,
                "frame_index": index,
                "color_path": str(colors[index]),
                "depth_path": str(depths[index]),
                "instance_path": str(instances[index]) if index in instances else None,
                "depth_scale": depth_scale,
                "color_width": color_size[0],
                "color_height": color_size[1],
                "depth_width": depth_size[0],
                "depth_height": depth_size[1],
                "color_intrinsics": color_k.reshape(-1).tolist(),
                "depth_intrinsics": depth_k.reshape(-1).tolist(),
                "pose": pose.reshape(-1).tolist(),
                "source": source,
            }
        )
    if not frames:
        log.add(scene_id, "scene has no usable frame", source_file=str(scene_dir))
        return [], None, log
    aggregation = scene_dir / f"{scene_id}.aggregation.json"
    objects = []
    if aggregation.exists():
        data = _load_json(aggregation, log)
        for group in (data or {}).get("segGroups", []):
            objects.append(
                {
                    "object_id": int(group.get("objectId", group.get("id"))),
                    "label": str(group.get("label", "")),
                }
            )
    mesh = scene_dir / f"{scene_id}_vh_clean_2.ply"
    segs = scene_dir / f"{scene_id}_vh_clean_2.0.010000.segs.json"
    scene = {
        "scene_id": scene_id,
        "scene_dir": str(scene_dir),
        "mesh_path": str(mesh) if mesh.exists() else None,
        "segs_path": str(segs) if segs.exists() else None,
        "aggregation_path": str(aggregation) if aggregation.exists() else None,
        "objects": objects,
        "num_frames": len(frames),
        "source": source,
    }
    return frames, scene, log


def list_scannet_scenes(root: str | Path, config_field: str = "scannet_root") -> list[Path]:
    """The scene folders under a ScanNet ``scans`` folder (sorted by name)."""
    folder = require_path(root, config_field, "ScanNet scans folder")
    return sorted(path for path in folder.iterdir() if path.is_dir() and (path / "color").is_dir())


def read_scannet(
    root: str | Path, *, source: str = "scannet", config_field: str = "scannet_root"
) -> ScanNetTables:
    """Read every scene under a ScanNet ``scans`` folder."""
    frames: list[dict] = []
    scenes: list[dict] = []
    log = QuarantineLog("rgbd_frames")
    for scene_dir in list_scannet_scenes(root, config_field):
        scene_frames, scene, scene_log = read_scannet_scene(scene_dir, source=source)
        frames.extend(scene_frames)
        if scene is not None:
            scenes.append(scene)
        log.extend(scene_log)
    logger.info("ScanNet %s: %d scenes, %d frames, %d quarantined", root, len(scenes), len(frames), len(log))
    return ScanNetTables(
        frames=pl.DataFrame(frames, schema=polars_schema(rgbd_frames.RgbdFrames)),
        scenes=pl.DataFrame(scenes, schema=polars_schema(rgbd_scenes.RgbdScenes)),
        quarantine=log,
    )
