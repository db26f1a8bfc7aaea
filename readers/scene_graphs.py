"""Readers for scene graphs: raw Visual Genome v1.4 JSON, the VG150 h5 layout and prompt-style Parquet.

Visual Genome boxes are top-left ``x, y, w, h`` in pixels and relationship endpoints come as
``name`` or ``names`` dicts. Each reader returns a frame under the ``scene_graphs`` contract and a
quarantine log; :func:`read_scene_graphs` picks the reader for a layout (detected by
:func:`detect_scene_graph_layout`) and leaves out the images of unwanted splits.

Images of the raw and VG150 layouts are looked for in ``VG_100K/``, ``VG_100K_2/``, ``images/`` or the
folder itself, or in a configured images folder (with or without those subfolders). Every row carries
its ``split``: the VG150 h5 ``split`` array (0 train, 2 test), a prompt-style Parquet's ``split``
column or file name (``train-00000-of-00001.parquet``), else ``train``, or a configured label.

An image path a record names (by its ``image_id`` or ``url``) stays inside its root, the configured images
folder or else the annotations' folder, symbolic links followed: one that escapes is quarantined ("path
escapes its root") and never opened. Object names, attributes and predicates are bounded by
:data:`SCENE_GRAPH_TEXT_BOUNDS` (200 characters each): an object or relation over it is quarantined with the
field, its length and the bound, an over-long attribute is left out with a quarantine record.
"""

from __future__ import annotations

import io
import json
import logging
import re
from collections import Counter
from collections.abc import Collection, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
from PIL import Image, UnidentifiedImageError

from data_contracts import scene_graphs
from data_contracts.boxes import BoxError, cxcywh_to_xyxy, pixels_to_grid, xywh_to_xyxy
from data_contracts.quarantine import QuarantineLog
from data_contracts.validation import polars_schema
from readers.common import (
    MAX_LABEL_CHARS,
    MalformedInputError,
    MissingInputError,
    column_problem,
    image_problem,
    load_json,
    path_escape_problem,
    require_path,
    skip_byte_order_mark,
    text_field_problem,
)

logger = logging.getLogger(__name__)
VG_IMAGE_FOLDERS = ("VG_100K", "VG_100K_2", "images", ".")
VG150_SPLIT_CODES = {0: "train", 1: "val", 2: "test"}
PROMPT_PARQUET_COLUMNS = ("image_id", "image", "objects", "relationships")
SCENE_GRAPH_LAYOUTS = ("auto", "raw", "vg150", "parquet")
IMAGES_DIR_FIELD = "visual_genome_images_dir"
SCENE_GRAPH_TEXT_BOUNDS = {
    "name": MAX_LABEL_CHARS,
    "attribute": MAX_LABEL_CHARS,
    "predicate": MAX_LABEL_CHARS,
}
"""The longest text (characters) of an object name (each of its ``names``), an attribute and a predicate."""
_OUT_OF_ORDER_WARNING = 10_000
"""Entries waiting for their image at which a warning says the raw files are not in one order."""


def vg_image_folders(root: Path, images_dir: str | Path | None = None) -> list[Path]:
    """Folders searched for Visual Genome images: the configured one (and its ``VG_100K*``), else those beside ``root``.

    Raises:
        `MissingInputError`: when ``images_dir`` is set but does not exist.
    """
    if images_dir:
        folder = require_path(images_dir, IMAGES_DIR_FIELD, "Visual Genome images folder")
        return [folder, folder / "VG_100K", folder / "VG_100K_2"]
    return [root / name for name in VG_IMAGE_FOLDERS]


def _vg_image_path(folders: list[Path], image_id: str, url: str | None, root: Path) -> Path | None:
    """The first existing image file of ``image_id`` in ``folders``; the first candidate that escapes ``root``
    (reported, never looked for), or None."""
    names = [f"{image_id}.jpg", f"{image_id}.png"]
    if url:
        names.insert(0, url.rstrip("/").rsplit("/", 1)[-1])
    for folder in folders:
        for name in names:
            candidate = folder / name
            if path_escape_problem(candidate, root):
                return candidate
            if candidate.exists():
                return candidate
    return None


def split_from_file_name(path: Path) -> str | None:
    """The split a Hub-style Parquet file name states (``train-00000-of-00001.parquet``), if any.

    >>> split_from_file_name(Path("data/validation-00000-of-00002.parquet")), split_from_file_name(Path("vg.parquet"))
    ('val', None)
    """
    stem = re.split(r"[-_.]", path.stem.lower(), maxsplit=1)[0]
    stem = {"validation": "val", "valid": "val", "dev": "val"}.get(stem, stem)
    return stem if stem in scene_graphs.SPLITS else None


def _object_name(obj: dict) -> str:
    if isinstance(obj.get("names"), list) and obj["names"]:
        return str(obj["names"][0]).strip().lower()
    return str(obj.get("name", "")).strip().lower()


def _image_key(item: Any) -> str | None:
    if not isinstance(item, dict):
        return None
    value = item.get("image_id", item.get("id"))
    return None if value is None else str(value)


def iter_json_array(path: Path, config_field: str) -> Iterator[Any]:
    """The items of the JSON array in ``path``, parsed incrementally (one item in memory at a time).

    Raises:
        `MalformedInputError`: naming the file and how far it was read, when it is not a JSON array.
    """
    import ijson

    count = 0
    try:
        with path.open("rb") as handle:
            items = ijson.items(skip_byte_order_mark(handle), "item", use_float=True)
            for count, item in enumerate(items, start=1):  # noqa: B007
                yield item
    except (ijson.JSONError, UnicodeDecodeError) as error:
        raise MalformedInputError(
            f"{path} is not a readable JSON array (after {count} items: {error}); re-download it, then check "
            f"the config field `{config_field}`.",
            location=path,
            config_field=config_field,
        ) from None


class _ImageAligned:
    """Per-image entries of one raw-VG file, read in step with ``image_data.json``.

    The release's files list the images in the same order, so entries are read as each image is reached and
    memory holds about one image's entries; entries that come earlier than their image (another order) wait
    in a buffer until it is reached.
    """

    def __init__(self, items: Iterator[Any]) -> None:
        self._items = items
        self._waiting: dict[str, dict] = {}
        self._done = False

    def take(self, image_id: str) -> dict:
        """The entry of ``image_id`` (empty when the file has none before its end)."""
        if image_id in self._waiting:
            return self._waiting.pop(image_id)
        while not self._done:
            item = next(self._items, None)
            if item is None:
                self._done = True
                break
            key = _image_key(item)
            if key == image_id:
                return item
            if key is not None:
                self._waiting[key] = item
                if len(self._waiting) == _OUT_OF_ORDER_WARNING:
                    logger.warning(
                        "Visual Genome files list the images in different orders: %d entries wait for their "
                        "image in memory",
                        len(self._waiting),
                    )
        return {}


def iter_visual_genome(
    root: str | Path,
    log: QuarantineLog,
    *,
    images_dir: str | Path | None = None,
    split: str | None = None,
    source: str = "visual_genome",
    config_field: str = "visual_genome_root",
) -> Iterator[dict]:
    """The ``scene_graphs`` rows of raw Visual Genome v1.4 JSON (``image_data``, ``objects``,
    ``relationships``, ``attributes``), one image at a time: the four files are parsed incrementally, in step,
    and each image's file is read when its row is made. Rejected records go to ``log``.

    Raw Visual Genome has no split: every image is labelled ``split`` (default ``train``).

    Raises:
        `MissingInputError`: when the folder, ``image_data.json`` or ``objects.json`` is missing.
        `MalformedInputError`: when a file is not a JSON array.
    """
    folder = require_path(root, config_field, "Visual Genome folder")
    image_folders = vg_image_folders(folder, images_dir)
    image_root = image_folders[0] if images_dir else folder  # where every image must stay
    split = _checked_split(split or "train")
    paths = {
        name: folder / f"{name}.json" for name in ("image_data", "objects", "relationships", "attributes")
    }
    for name in ("image_data", "objects"):
        if not paths[name].exists():
            raise MissingInputError(
                f"Visual Genome {paths[name].name} not found in {folder}: set `{config_field}`."
            )
    aligned = {
        name: _ImageAligned(iter_json_array(paths[name], config_field) if paths[name].exists() else iter(()))
        for name in ("objects", "relationships", "attributes")
    }
    kept = 0
    for info in iter_json_array(paths["image_data"], config_field):
        image_id = _image_key(info)
        if image_id is None:
            log.add("?", "malformed record: image_data entry without image_id", payload=info)
            continue
        objects, relationships, attributes = (aligned[name].take(image_id) for name in aligned)
        image_path = _vg_image_path(image_folders, image_id, info.get("url"), image_root)
        image, problem = image_problem(image_path, image_id, image_root)
        if image is None:
            log.add(image_id, problem, source_file=str(image_path or paths["image_data"]))
            continue
        cell, file_width, file_height = image
        width = int(info.get("width") or file_width)
        height = int(info.get("height") or file_height)
        row = _vg_scene(
            image_id,
            width,
            height,
            objects.get("objects", []),
            relationships.get("relationships", []),
            attributes.get("attributes", []),
            log,
            folder,
        )
        row.update({"image": cell, "source": source, "split": split})
        kept += 1
        yield row
    logger.info("Visual Genome %s: %d images kept, %d records quarantined", folder, kept, len(log))


def read_visual_genome(
    root: str | Path,
    *,
    images_dir: str | Path | None = None,
    split: str | None = None,
    source: str = "visual_genome",
    config_field: str = "visual_genome_root",
) -> tuple[pl.DataFrame, QuarantineLog]:
    """Raw Visual Genome v1.4 JSON as one frame (see :func:`iter_visual_genome`; the asset streams it)."""
    log = QuarantineLog("scene_graphs")
    rows = iter_visual_genome(
        root, log, images_dir=images_dir, split=split, source=source, config_field=config_field
    )
    return pl.DataFrame(list(rows), schema=polars_schema(scene_graphs.SceneGraphs)), log


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
    """One raw-VG image's scene graph: its kept objects (with their attributes) and relations."""
    kept, alias = _vg_objects(image_id, width, height, objects, log, folder / "objects.json")
    _attach_vg_attributes(kept, alias, attributes, log, folder / "attributes.json")
    return {
        "image_id": image_id,
        "image_width": width,
        "image_height": height,
        "objects": list(kept.values()),
        "relationships": _vg_relations(image_id, relationships, alias, log, folder / "relationships.json"),
    }


def _vg_objects(
    image_id: str, width: int, height: int, objects: list, log: QuarantineLog, source: Path
) -> tuple[dict[str, dict], dict[str, str]]:
    """The image's valid objects by id, and every id (merged ones included) mapped to its kept object."""
    kept: dict[str, dict] = {}
    alias: dict[str, str] = {}
    for obj in objects or []:
        if not isinstance(obj, dict) or "object_id" not in obj:
            log.add(f"{image_id}/?", "malformed object: no object_id", source_file=str(source), payload=obj)
            continue
        object_id = str(obj["object_id"])
        name = _object_name(obj)
        try:
            box_px = xywh_to_xyxy([obj["x"], obj["y"], obj["w"], obj["h"]])
            box = pixels_to_grid(box_px, width, height)
        except (KeyError, TypeError, ValueError, BoxError) as error:
            log.add(f"{image_id}/{object_id}", f"bad box: {error}", source_file=str(source), payload=obj)
            continue
        if not name:
            log.add(f"{image_id}/{object_id}", "bad object: no name", source_file=str(source), payload=obj)
            continue
        names = [str(n).strip().lower() for n in obj.get("names", [name]) if str(n).strip()]
        too_long = _name_length_problem([name, *names])
        if too_long:
            log.add(f"{image_id}/{object_id}", too_long, source_file=str(source), payload=obj)
            continue
        clipped = [
            max(0.0, box_px[0]),
            max(0.0, box_px[1]),
            min(float(width), box_px[2]),
            min(float(height), box_px[3]),
        ]
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
    return kept, alias


def _name_length_problem(names: list[str]) -> str:
    """Why one of an object's names is longer than its bound, or ``""``.

    >>> _name_length_problem(["chair", "x" * 201])
    'text too long: name has 201 characters, at most 200 allowed'
    """
    for name in names:
        problem = text_field_problem({"name": name}, ["name"], SCENE_GRAPH_TEXT_BOUNDS)
        if problem:
            return problem
    return ""


def _attach_vg_attributes(
    kept: dict[str, dict], alias: dict[str, str], attributes: list, log: QuarantineLog, source: Path
) -> None:
    """Add each attribute entry's (lower-cased, de-duplicated) attributes to the object it names; an attribute
    longer than its bound is left out with a quarantine record."""
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
            too_long = text_field_problem({"attribute": text}, ["attribute"], SCENE_GRAPH_TEXT_BOUNDS)
            if too_long:
                log.add(f"{target}/attribute", too_long, source_file=str(source), payload=entry)
                continue
            if text and text not in kept[target]["attributes"]:
                kept[target]["attributes"].append(text)


def _vg_relations(
    image_id: str, relationships: list, alias: dict[str, str], log: QuarantineLog, source: Path
) -> list[dict]:
    """The image's relations between kept objects; malformed, dangling or unnamed ones quarantined."""
    relations = []
    for relation in relationships or []:
        relation_id = (
            f"{image_id}/rel{relation.get('relationship_id', '?') if isinstance(relation, dict) else '?'}"
        )
        if not isinstance(relation, dict):
            log.add(relation_id, "malformed relation", source_file=str(source), payload=relation)
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
                source_file=str(source),
                payload=relation,
            )
            continue
        if not predicate:
            log.add(relation_id, "bad relation: empty predicate", source_file=str(source), payload=relation)
            continue
        too_long = text_field_problem({"predicate": predicate}, ["predicate"], SCENE_GRAPH_TEXT_BOUNDS)
        if too_long:
            log.add(relation_id, too_long, source_file=str(source), payload=relation)
            continue
        relations.append({"subject_id": subject_id, "predicate": predicate, "object_id": object_id})
    return relations


VG150_H5 = "VG-SGG-with-attri.h5"
VG150_DICTS = "VG-SGG-dicts-with-attri.json"
VG150_CORRUPTED_IMAGES = frozenset({"1592", "1722", "4616", "4617"})


def _checked_split(split: str) -> str:
    if split not in scene_graphs.SPLITS:
        raise ValueError(f"scene-graph split must be one of {scene_graphs.SPLITS}, got {split!r}")
    return split


def read_vg150(
    root: str | Path,
    *,
    box_scale: int = 1024,
    images_dir: str | Path | None = None,
    splits: Collection[str] | None = None,
    source: str = "vg150",
    config_field: str = "visual_genome_root",
) -> tuple[pl.DataFrame, QuarantineLog]:
    """The VG150 scene-graph split as one frame (see :func:`iter_vg150`; the asset streams it)."""
    log = QuarantineLog("scene_graphs")
    rows = iter_vg150(
        root,
        log,
        Counter(),
        box_scale=box_scale,
        images_dir=images_dir,
        splits=splits,
        source=source,
        config_field=config_field,
    )
    return pl.DataFrame(list(rows), schema=polars_schema(scene_graphs.SceneGraphs)), log


def _vg150_split_labels(h5: Any, count: int, log: QuarantineLog, h5_path: Path) -> list[str | None]:
    """One split label per h5 row (``None`` for an unknown code); ``train`` for every row of a file without ``split``."""
    if "split" not in h5:
        logger.warning("%s has no 'split' dataset: every image is labelled train", h5_path)
        return ["train"] * count
    codes = h5["split"][:].reshape(-1).tolist()
    labels: list[str | None] = [VG150_SPLIT_CODES.get(int(code)) for code in codes[:count]]
    unknown = sorted({int(code) for code in codes if int(code) not in VG150_SPLIT_CODES})
    if unknown:
        log.add(
            "vg150", f"unknown split codes {unknown} (known: {VG150_SPLIT_CODES})", source_file=str(h5_path)
        )
    return labels + [None] * (count - len(labels))


@dataclass(frozen=True)
class _Vg150Graphs:
    """The VG150 h5 file's arrays (one row per image, box and relation) with the dictionaries' names."""

    h5_path: Path
    boxes: np.ndarray
    labels: np.ndarray
    attributes: np.ndarray
    first_box: np.ndarray
    last_box: np.ndarray
    first_rel: np.ndarray
    last_rel: np.ndarray
    relationships: np.ndarray
    predicates: np.ndarray
    split_labels: list[str | None]
    label_names: dict[int, str]
    predicate_names: dict[int, str]
    attribute_names: dict[int, str]


def _vg150_names(dicts: dict) -> tuple[dict[int, str], dict[int, str], dict[int, str]]:
    """The dictionaries' object label, predicate and attribute names by index."""
    label_names = {int(k): v for k, v in dicts.get("idx_to_label", {}).items()}
    predicate_names = {int(k): v for k, v in dicts.get("idx_to_predicate", {}).items()}
    attribute_names = {int(k): v for k, v in dicts.get("idx_to_attribute", {}).items()}
    return label_names, predicate_names, attribute_names


def _read_vg150_h5(
    h5_path: Path,
    box_scale: int,
    names: tuple[dict[int, str], dict[int, str], dict[int, str]],
    log: QuarantineLog,
) -> _Vg150Graphs:
    """The arrays of the h5 file, read whole (boxes at ``box_scale``), with ``names`` (:func:`_vg150_names`)."""
    import h5py

    label_names, predicate_names, attribute_names = names
    with h5py.File(h5_path, "r") as h5:
        boxes = h5[f"boxes_{box_scale}"][:]
        labels = h5["labels"][:].reshape(-1)
        attributes = h5["attributes"][:] if "attributes" in h5 else np.zeros((len(labels), 0), dtype=int)
        first_box, last_box = h5["img_to_first_box"][:], h5["img_to_last_box"][:]
        first_rel, last_rel = h5["img_to_first_rel"][:], h5["img_to_last_rel"][:]
        relationships = h5["relationships"][:]
        predicates = h5["predicates"][:].reshape(-1)
        split_labels = _vg150_split_labels(h5, len(first_box), log, h5_path)
    return _Vg150Graphs(
        h5_path=h5_path,
        boxes=boxes,
        labels=labels,
        attributes=attributes,
        first_box=first_box,
        last_box=last_box,
        first_rel=first_rel,
        last_rel=last_rel,
        relationships=relationships,
        predicates=predicates,
        split_labels=split_labels,
        label_names=label_names,
        predicate_names=predicate_names,
        attribute_names=attribute_names,
    )


def _vg150_objects(
    graphs: _Vg150Graphs,
    index: int,
    image_id: str,
    width: int,
    height: int,
    box_scale: int,
    log: QuarantineLog,
) -> dict[int, dict]:
    """The objects of image row ``index`` by h5 box row, their boxes scaled to the image's ``width`` x
    ``height``; a box that is not usable is quarantined."""
    scale = max(width, height) / box_scale
    objects: dict[int, dict] = {}
    if graphs.first_box[index] < 0:
        return objects
    for box_index in range(int(graphs.first_box[index]), int(graphs.last_box[index]) + 1):
        name = graphs.label_names.get(int(graphs.labels[box_index]), "object")
        object_id = f"{name}.{box_index - int(graphs.first_box[index]) + 1}"
        try:
            box_px = [v * scale for v in cxcywh_to_xyxy(graphs.boxes[box_index].tolist())]
            box = pixels_to_grid(box_px, width, height)
        except BoxError as error:
            log.add(f"{image_id}/{object_id}", f"bad box: {error}", source_file=str(graphs.h5_path))
            continue
        objects[box_index] = {
            "object_id": object_id,
            "name": name,
            "names": [name],
            "attributes": [
                graphs.attribute_names[a]
                for a in graphs.attributes[box_index].tolist()
                if a in graphs.attribute_names
            ],
            "bbox": box,
            "bbox_px": [
                max(0.0, box_px[0]),
                max(0.0, box_px[1]),
                min(width, box_px[2]),
                min(height, box_px[3]),
            ],
        }
    return objects


def _vg150_relations(
    graphs: _Vg150Graphs, index: int, image_id: str, objects: dict[int, dict], log: QuarantineLog
) -> list[dict]:
    """The relations of image row ``index`` between its kept ``objects``; one to a dropped box is quarantined."""
    relations: list[dict] = []
    if graphs.first_rel[index] < 0:
        return relations
    for rel_index in range(int(graphs.first_rel[index]), int(graphs.last_rel[index]) + 1):
        subject_index, object_index = (int(v) for v in graphs.relationships[rel_index])
        if subject_index not in objects or object_index not in objects:
            log.add(f"{image_id}/rel{rel_index}", "dangling relation: box was dropped or out of range")
            continue
        relations.append(
            {
                "subject_id": objects[subject_index]["object_id"],
                "predicate": graphs.predicate_names.get(int(graphs.predicates[rel_index]), "related to"),
                "object_id": objects[object_index]["object_id"],
            }
        )
    return relations


def iter_vg150(
    root: str | Path,
    log: QuarantineLog,
    excluded: Counter[str],
    *,
    box_scale: int = 1024,
    images_dir: str | Path | None = None,
    splits: Collection[str] | None = None,
    source: str = "vg150",
    config_field: str = "visual_genome_root",
) -> Iterator[dict]:
    """The ``scene_graphs`` rows of the VG150 split (``VG-SGG-with-attri.h5`` + dicts + ``image_data.json``),
    one image at a time (``image_data.json`` parsed incrementally, each image's file read for its row).

    Boxes in the h5 file are centre x, centre y, width, height scaled so the longer image side is
    ``box_scale`` (1024 in the common release; the dataset ``boxes_512`` is used when asked for 512).
    Rows of the h5 file align with ``image_data.json`` after dropping the known corrupted images. The
    h5 ``split`` array (0 train, 2 test) becomes the ``split`` column; with ``splits`` given, images of
    other splits are skipped before their image file is read and counted in ``excluded``.
    """
    folder = require_path(root, config_field, "VG150 folder")
    image_folders = vg_image_folders(folder, images_dir)
    image_root = image_folders[0] if images_dir else folder  # where every image must stay
    dicts = load_json(require_path(folder / VG150_DICTS, config_field, "VG150 dictionary"), log)
    image_data_path = require_path(folder / "image_data.json", config_field, "VG150 image_data.json")
    if dicts is None:
        return
    names = _vg150_names(dicts)
    h5_path = require_path(folder / VG150_H5, config_field, "VG150 h5 file")
    graphs = _read_vg150_h5(h5_path, box_scale, names, log)
    images = (
        info
        for info in iter_json_array(image_data_path, config_field)
        if str(_image_key(info)) not in VG150_CORRUPTED_IMAGES
    )
    count = 0
    for index, info in enumerate(images):
        count = index + 1
        if index >= len(graphs.first_box):
            continue  # counted for the misalignment record below
        image_id = str(_image_key(info))
        split = graphs.split_labels[index]
        if split is None:
            log.add(image_id, "unknown split code in the h5 'split' array", source_file=str(h5_path))
            continue
        if splits is not None and split not in splits:
            excluded[split] += 1
            continue
        image_path = _vg_image_path(image_folders, image_id, info.get("url"), image_root)
        image, problem = image_problem(image_path, image_id, image_root)
        if image is None:
            log.add(image_id, problem, source_file=str(image_path or folder))
            continue
        cell, file_width, file_height = image
        width, height = int(info.get("width") or file_width), int(info.get("height") or file_height)
        objects = _vg150_objects(graphs, index, image_id, width, height, box_scale, log)
        yield {
            "image_id": image_id,
            "image": cell,
            "image_width": width,
            "image_height": height,
            "objects": list(objects.values()),
            "relationships": _vg150_relations(graphs, index, image_id, objects, log),
            "source": source,
            "split": split,
        }
    if count != len(graphs.first_box):
        log.add(
            "vg150",
            f"misaligned: {len(graphs.first_box)} h5 rows vs {count} images after dropping corrupted ones",
            source_file=str(h5_path),
        )
    if excluded:
        logger.info("VG150 %s: images left out by split: %s", folder, dict(excluded))


def _parquet_files(location: Path) -> list[Path]:
    if location.is_file():
        return [location]
    return sorted(location.rglob("*.parquet"))


def iter_scene_graph_parquet(
    path: str | Path,
    log: QuarantineLog,
    *,
    split: str | None = None,
    source: str = "vg150_prompt",
    config_field: str = "visual_genome_root",
) -> Iterator[dict]:
    """The ``scene_graphs`` rows of the prompt-style VG150 variant (``image_id, image, objects,
    relationships`` with JSON strings), read a row group at a time.

    ``path`` is a Parquet file or a folder of them (a Hub snapshot with ``data/*.parquet``). Objects are
    ``{"id": "name.N", "bbox": [x1, y1, x2, y2]}`` in pixels; relationships are ``{"subject": id,
    "predicate": str, "object": id}``. A file whose columns are not these is quarantined once, naming
    the missing columns. ``split`` labels every row; by default a row's ``split`` column, else the file
    name's split (``val-00000-of-00001.parquet``), else ``train``.
    """
    import pyarrow.parquet as pq

    location = require_path(path, config_field, "scene-graph Parquet file or folder")
    files = _parquet_files(location)
    if not files:
        log.add(location.name, "no Parquet file in the folder", source_file=str(location))
    kept = 0
    for table in files:
        with table.open("rb") as handle:
            parquet = pq.ParquetFile(handle)
            problem = column_problem(parquet.schema_arrow.names, PROMPT_PARQUET_COLUMNS)
            if problem:
                log.add(table.name, problem, source_file=str(table))
                continue
            file_split = split or split_from_file_name(table) or "train"
            for batch in parquet.iter_batches(batch_size=256):
                for record in batch.to_pylist():
                    row = _prompt_style_row(record, table, log)
                    if row is None:
                        continue
                    row_split = split or str(record.get("split") or file_split).lower()
                    row.update({"source": source, "split": "val" if row_split == "validation" else row_split})
                    kept += 1
                    yield row
    logger.info("Scene-graph Parquet %s: %d images kept, %d records quarantined", location, kept, len(log))


def read_scene_graph_parquet(
    path: str | Path,
    *,
    split: str | None = None,
    source: str = "vg150_prompt",
    config_field: str = "visual_genome_root",
) -> tuple[pl.DataFrame, QuarantineLog]:
    """The prompt-style VG150 variant as one frame (see :func:`iter_scene_graph_parquet`)."""
    log = QuarantineLog("scene_graphs")
    rows = iter_scene_graph_parquet(path, log, split=split, source=source, config_field=config_field)
    return pl.DataFrame(list(rows), schema=polars_schema(scene_graphs.SceneGraphs)), log


def _prompt_style_row(record: dict, table: Path, log: QuarantineLog) -> dict | None:
    """One prompt-style record as a ``scene_graphs`` row (without source and split), or ``None`` when quarantined."""
    if record.get("image_id") is None:
        log.add("?", "missing image_id", source_file=str(table))
        return None
    image_id = str(record["image_id"])
    cell = record.get("image") or {}
    try:
        with Image.open(io.BytesIO(cell.get("bytes") or b"")) as image:
            width, height = image.size
    except (UnidentifiedImageError, OSError) as error:
        log.add(image_id, f"corrupt image: {error}", source_file=str(table))
        return None
    try:
        objects = json.loads(record["objects"]) if isinstance(record["objects"], str) else record["objects"]
        relationships = (
            json.loads(record["relationships"])
            if isinstance(record["relationships"], str)
            else record["relationships"]
        )
    except (json.JSONDecodeError, KeyError, TypeError) as error:
        log.add(image_id, f"malformed JSON: {error}", source_file=str(table))
        return None
    kept = {}
    for obj in objects or []:
        if not isinstance(obj, dict):
            log.add(f"{image_id}/?", "malformed object: not an object", source_file=str(table), payload=obj)
            continue
        object_id = str(obj.get("id", ""))
        try:
            box = pixels_to_grid(obj["bbox"], width, height)
        except (KeyError, TypeError, BoxError) as error:
            log.add(f"{image_id}/{object_id}", f"bad box: {error}", source_file=str(table), payload=obj)
            continue
        name = re.sub(r"\.\d+$", "", object_id)
        too_long = _name_length_problem([name])
        if too_long:
            log.add(
                f"{image_id}/{object_id[:MAX_LABEL_CHARS]}", too_long, source_file=str(table), payload=obj
            )
            continue
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
        if not isinstance(relation, dict):
            log.add(f"{image_id}/?", "malformed relation", source_file=str(table), payload=relation)
            continue
        subject, obj = str(relation.get("subject", "")), str(relation.get("object", ""))
        if subject not in kept or obj not in kept:
            log.add(
                f"{image_id}/{subject}-{obj}",
                "dangling relation",
                source_file=str(table),
                payload=relation,
            )
            continue
        predicate = str(relation.get("predicate", ""))
        too_long = text_field_problem({"predicate": predicate}, ["predicate"], SCENE_GRAPH_TEXT_BOUNDS)
        if too_long:
            log.add(f"{image_id}/{subject}-{obj}", too_long, source_file=str(table), payload=relation)
            continue
        relations.append({"subject_id": subject, "predicate": predicate, "object_id": obj})
    return {
        "image_id": image_id,
        "image": {"bytes": cell.get("bytes"), "path": cell.get("path")},
        "image_width": width,
        "image_height": height,
        "objects": list(kept.values()),
        "relationships": relations,
    }


def detect_scene_graph_layout(root: Path) -> str:
    """The layout of a scene-graph input: ``"vg150"``, ``"parquet"`` or ``"raw"``.

    ``"vg150"`` when the VG150 h5 file is present; ``"raw"`` when ``image_data.json`` is (or nothing
    is recognised, so the raw reader names what is missing); ``"parquet"`` for a Parquet file or a
    folder of them (a Hub snapshot with ``data/*.parquet``).
    """
    if root.is_file():
        return "parquet" if root.suffix == ".parquet" else "raw"
    if (root / VG150_H5).exists():
        return "vg150"
    if (root / "image_data.json").exists():
        return "raw"
    if root.is_dir() and next(root.rglob("*.parquet"), None) is not None:
        return "parquet"
    return "raw"


@dataclass
class SceneGraphRead:
    """What :func:`read_scene_graphs` read: the kept rows, the quarantine, the layout, and images left out by split."""

    frame: pl.DataFrame
    quarantine: QuarantineLog
    layout: str
    excluded_by_split: dict[str, int] = field(default_factory=dict)


@dataclass
class SceneGraphStream:
    """Scene graphs read incrementally: :meth:`batches` yields frames of at most ``batch_rows`` rows under the
    ``scene_graphs`` contract, and fills ``quarantine`` and ``excluded_by_split`` as it goes (complete once
    the batches are consumed). Memory holds one batch, whatever the size of the data set."""

    rows: Iterator[dict]
    quarantine: QuarantineLog
    layout: str
    keep_splits: Collection[str] | None = None
    excluded_by_split: Counter[str] = field(default_factory=Counter)
    batch_rows: int = 256

    def batches(self) -> Iterator[pl.DataFrame]:
        schema = polars_schema(scene_graphs.SceneGraphs)
        batch: list[dict] = []
        for row in self.rows:
            if self.keep_splits is not None and row["split"] not in self.keep_splits:
                self.excluded_by_split[row["split"]] += 1
                continue
            batch.append(row)
            if len(batch) == self.batch_rows:
                yield pl.DataFrame(batch, schema=schema)
                batch = []
        if batch:
            yield pl.DataFrame(batch, schema=schema)


def stream_scene_graphs(
    root: str | Path,
    *,
    layout: str = "auto",
    images_dir: str | Path | None = None,
    box_scale: int = 1024,
    split: str | None = None,
    keep_splits: Collection[str] | None = None,
    config_field: str = "visual_genome_root",
    batch_rows: int = 256,
) -> SceneGraphStream:
    """Scene graphs in ``layout`` (``auto`` detects it), the images of ``keep_splits`` (all when ``None``),
    read incrementally (see :class:`SceneGraphStream`).

    Args:
        root: the raw or VG150 folder, or a prompt-style Parquet file or folder (local or on the Hub).
        images_dir: where the raw and VG150 layouts' images are (default: beside the annotations).
        box_scale: longer-side scale of the VG150 h5 boxes.
        split: the split label of raw and Parquet rows (default: see the readers); VG150 keeps its own.
        keep_splits: splits kept; the others are left out (not quarantined: they are valid) and counted.

    Raises:
        `ValueError`: for an unknown layout or split label.
        `MissingInputError`: when the location does not exist.
    """
    if layout not in SCENE_GRAPH_LAYOUTS:
        raise ValueError(
            f"unknown visual_genome_layout {layout!r}: use {', '.join(map(repr, SCENE_GRAPH_LAYOUTS))}"
        )
    if split is not None:
        _checked_split(split)
    location = require_path(root, config_field, "Visual Genome folder or file")
    detected = detect_scene_graph_layout(location) if layout == "auto" else layout
    log = QuarantineLog("scene_graphs")
    excluded: Counter[str] = Counter()
    if detected == "vg150":
        rows = iter_vg150(
            location,
            log,
            excluded,
            box_scale=box_scale,
            images_dir=images_dir,
            splits=keep_splits,
            source="vg150",
            config_field=config_field,
        )
    elif detected == "parquet":
        rows = iter_scene_graph_parquet(location, log, split=split, config_field=config_field)
    else:
        rows = iter_visual_genome(
            location, log, images_dir=images_dir, split=split, config_field=config_field
        )
    return SceneGraphStream(rows, log, detected, keep_splits, excluded, batch_rows)


def read_scene_graphs(root: str | Path, **options: Any) -> SceneGraphRead:
    """Scene graphs as one frame (see :func:`stream_scene_graphs`, which takes the same options; the
    ``scene_graphs`` asset streams them)."""
    stream = stream_scene_graphs(root, **options)
    frames = list(stream.batches())
    frame = pl.concat(frames) if frames else pl.DataFrame(schema=polars_schema(scene_graphs.SceneGraphs))
    return SceneGraphRead(frame, stream.quarantine, stream.layout, dict(stream.excluded_by_split))


# --------------------------------------------------------------------------------------------------
# ScanNet
# --------------------------------------------------------------------------------------------------
