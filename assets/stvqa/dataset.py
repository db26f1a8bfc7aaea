"""The STVQA data set: balance, split, option shuffling, STVQA-7K columns; and ingesting STVQA-7K itself.

From the pass@2-validated questions to the ``stvqa`` training table:

1. **Balance** (:func:`plan_quotas`, :func:`balance_questions`): ``relation_share`` (50%) relation, the
   other eight categories equal shares of the rest. The size is the largest that keeps relation at its
   share (or ``target_size`` when smaller). When a category has too few questions, its shortfall is
   spread equally over the others (water-filling), so shares stay as equal as the supply allows.
   Within a category the highest-rated questions are taken first; ties are broken by a stable hash.
2. **Split** (:func:`split_by_image`): 90/10 train/val *by image*, so no image is in both splits;
   images are ordered by a seeded SHA-256 of their id and go to val until it holds its share of rows.
3. **Options shuffled** (:func:`shuffle_options`) by a generator seeded with a SHA-256 of the seed, the
   image id and the question text, identical in every process (the reference used Python's salted
   `hash()`, which changes with ``PYTHONHASHSEED``); the gold letter follows its option.
4. **Columns** of the published STVQA-7K (see :mod:`data_contracts.stvqa`), with ``problem`` carrying
   SpatialThinker's prompt and its ``Image size: (W x H)`` line, plus the image size and ``gt_scene``.

:func:`read_published_stvqa` reads the published STVQA-7K Parquet files from a local folder (or one
file) into the same columns: the gold letter from ``answer_only`` or the ``<answer>`` tag, the ground
truth from the ``<scene>`` JSON (pixel boxes moved to the 0..1000 grid), the image size from the
``Image size`` line or the image itself, the split from a ``split`` column or the file name.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl
from pydantic import BaseModel, Field

from assets.stvqa.templates import stable_rng
from assets.stvqa.validation import normalize_category, normalize_letter, normalize_rating
from assets.stvqa.vocabulary import CATEGORIES, RELATION_SHARE
from data_contracts.boxes import BoxError, pixels_to_grid
from data_contracts.images import ImageDecodeError, decode_image
from data_contracts.origin import REAL
from data_contracts.quarantine import QuarantineLog
from data_contracts.stvqa import Stvqa
from data_contracts.validation import polars_schema

logger = logging.getLogger(__name__)

LETTERS = "ABCD"
SOURCE_ASSET = "stvqa"
VAL_FRACTION = 0.1


class StvqaDatasetSettings(BaseModel):
    """How the validated questions become the data set; the ``stvqa`` run config extends this model.

    >>> StvqaDatasetSettings().relation_share
    0.5
    """

    relation_share: float = Field(
        default=RELATION_SHARE,
        description="Share of relation questions; the other eight categories split the rest.",
    )
    target_size: int | None = Field(
        default=None, description="Wanted number of rows; default the largest balanced set."
    )
    val_fraction: float = Field(
        default=VAL_FRACTION, description="Share of rows in the val split (split by image)."
    )
    seed: int = Field(default=0, description="Seed of the tie-breaks, the split and the option shuffling.")


SPATIALTHINKER_PROMPT = """<image> You answer a question about the image by observing it, building a scene graph of the objects and relations that matter for the question, and reasoning over that graph.

Steps:
- Find the objects relevant to the question and the relationships between them, and localise each object in the image.
- Write them as a structured scene graph: give every object an id "object_name.number" (for example "boy.1", "plate.2") and a bounding box [x1, y1, x2, y2] in pixel coordinates of the image.
- Reason over your observations and the scene graph, step by step, before the final answer.

Use exactly this structure:
<observe>
{{what the image shows, and which objects the question is about}}
</observe>
<scene>
{{"objects": [{{"id": "object_name.1", "bbox": [x1, y1, x2, y2]}}, ...], "relationships": [{{"subject": "object_name.1", "predicate": "predicate_word", "object": "object_name.2"}}, ...]}}
</scene>
<think>
{{step-by-step reasoning from the scene graph to the answer}}
</think>
<answer>
{{the option letter and text, e.g. (A) behind}}
</answer>

Image size: ({width} x {height})

Now answer the following question:"""
"""SpatialThinker's prompt (the ``problem`` column's preamble); ``{width}``/``{height}`` are the image's pixels."""


# -- balance ----------------------------------------------------------------------------------------
def _water_fill(supply: Mapping[str, int], total: int, order: Sequence[str]) -> dict[str, int]:
    """Split `total` over categories as equally as their `supply` allows (integer counts)."""
    quotas = dict.fromkeys(order, 0)
    remaining = min(total, sum(supply.get(name, 0) for name in order))
    while remaining > 0:
        open_names = [name for name in order if quotas[name] < supply.get(name, 0)]
        share = max(1, remaining // len(open_names))
        for name in sorted(open_names, key=lambda n: (quotas[n], order.index(n))):
            if remaining == 0:
                break
            step = min(share, supply[name] - quotas[name], remaining)
            quotas[name] += step
            remaining -= step
    return quotas


def plan_quotas(
    available: Mapping[str, int], relation_share: float = RELATION_SHARE, target_size: int | None = None
) -> dict[str, int]:
    """How many questions of each category the balanced set takes.

    Args:
        available (`Mapping[str, int]`): questions available per category.
        relation_share (`float`, defaults to `0.5`): share of relation questions.
        target_size (`int`, *optional*): wanted size; the largest balanced size when `None` (or when smaller).

    Example:
        >>> quotas = plan_quotas({"relation": 100, **{c: 10 for c in CATEGORIES if c != "relation"}})
        >>> quotas["relation"], quotas["depth"], sum(quotas.values())
        (80, 10, 160)
        >>> plan_quotas({"relation": 10, "depth": 30, "count": 2})["depth"]
        8
    """
    if not 0.0 <= relation_share <= 1.0:
        raise ValueError(f"relation_share must be in [0, 1], got {relation_share}")
    others = [category for category in CATEGORIES if category != "relation"]
    relation_supply = available.get("relation", 0)
    other_supply = sum(available.get(category, 0) for category in others)
    limits = []
    if relation_share > 0:
        limits.append(relation_supply / relation_share)
    if relation_share < 1:
        limits.append(other_supply / (1.0 - relation_share))
    size = math.floor(min(limits) + 1e-9) if limits else 0
    if target_size is not None:
        size = min(size, target_size)
    relation_quota = min(relation_supply, math.floor(relation_share * size + 0.5))
    other_total = size - relation_quota
    per_category = other_total // len(others)
    if 0 < relation_share < 1 and per_category and all(available.get(c, 0) >= per_category for c in others):
        # every category can fill an equal share: drop the remainder so the shares are exactly equal
        other_total = per_category * len(others)
        wanted = math.floor(other_total * relation_share / (1.0 - relation_share) + 0.5)
        relation_quota = min(relation_supply, wanted)
    other_quotas = _water_fill({c: available.get(c, 0) for c in others}, other_total, others)
    return {"relation": relation_quota, **other_quotas}


def _tie_key(seed: int, question_id: str) -> str:
    return hashlib.sha256(f"{seed}\x1f{question_id}".encode()).hexdigest()


def balance_questions(
    validated: pl.DataFrame,
    relation_share: float = RELATION_SHARE,
    target_size: int | None = None,
    seed: int = 0,
) -> tuple[pl.DataFrame, dict[str, int]]:
    """The balanced selection of validated questions (top-rated first per category) and the quotas used."""
    available = {
        str(key): int(value)
        for key, value in Counter(validated["category"].cast(pl.String).to_list()).items()
    }
    quotas = plan_quotas(available, relation_share, target_size)
    if validated.height == 0:
        return validated, quotas
    ranked = validated.with_columns(
        pl.col("question_id")
        .map_elements(lambda value: _tie_key(seed, value), return_dtype=pl.String)
        .alias("_tie")
    ).sort(["rating", "_tie"], descending=[True, False])
    parts = [
        ranked.filter(pl.col("category").cast(pl.String) == category).head(quota)
        for category, quota in quotas.items()
        if quota > 0
    ]
    selected = pl.concat(parts) if parts else ranked.head(0)
    return selected.drop("_tie"), quotas


# -- split and shuffling ----------------------------------------------------------------------------
def split_by_image(frame: pl.DataFrame, val_fraction: float = VAL_FRACTION, seed: int = 0) -> pl.DataFrame:
    """Add a ``split`` column: val for images (in seeded-hash order) until val holds `val_fraction` of the rows.

    >>> frame = pl.DataFrame({"image_id": [str(i // 2) for i in range(20)]})
    >>> split_by_image(frame)["split"].value_counts().sort("split")["count"].to_list()
    [18, 2]
    """
    if not 0.0 <= val_fraction < 1.0:
        raise ValueError(f"val_fraction must be in [0, 1), got {val_fraction}")
    rows_per_image = Counter(frame["image_id"].to_list())
    order = sorted(
        rows_per_image, key=lambda image_id: hashlib.sha256(f"{seed}\x1f{image_id}".encode()).hexdigest()
    )
    wanted = round(val_fraction * frame.height)
    val_images: set[str] = set()
    val_rows = 0
    for image_id in order:
        if val_rows >= wanted:
            break
        val_images.add(image_id)
        val_rows += rows_per_image[image_id]
    return frame.with_columns(
        pl.when(pl.col("image_id").is_in(sorted(val_images)))
        .then(pl.lit("val"))
        .otherwise(pl.lit("train"))
        .alias("split")
    )


def shuffle_options(
    question: str, options: Sequence[str], answer: str, *, image_id: str = "", seed: int = 0
) -> tuple[list[str], str]:
    """Options in an order fixed by a SHA-256 of (seed, image id, question), and the gold letter that follows.

    >>> shuffle_options("Where is the cup?", ["on", "under", "behind"], "A", image_id="7")
    (['on', 'behind', 'under'], 'A')
    """
    gold = options[LETTERS.index(answer)]
    shuffled = list(options)
    stable_rng(seed, image_id, question).shuffle(shuffled)
    return shuffled, LETTERS[shuffled.index(gold)]


def question_with_options(question: str, options: Sequence[str]) -> str:
    """``question`` then ``Options:`` and one ``(A) text`` line per option.

    >>> print(question_with_options("Where is the cup?", ["on", "under"]))
    Where is the cup?
    Options:
    (A) on
    (B) under
    """
    lines = [f"({LETTERS[index]}) {option}" for index, option in enumerate(options)]
    return "\n".join([question, "Options:", *lines])


def problem_text(question_and_options: str, width: int, height: int) -> str:
    """SpatialThinker's prompt with the image size, then ``Q. `` and the question with its options."""
    return f"{SPATIALTHINKER_PROMPT.format(width=width, height=height)}\nQ. {question_and_options}"


def stvqa_row(
    *,
    image_id: str,
    image: Mapping[str, Any],
    width: int,
    height: int,
    question: str,
    options: Sequence[str],
    answer: str,
    category: str,
    level: str,
    rating: int | None,
    gt_scene: Mapping[str, Any],
    split: str,
    origin: str,
    problem: str | None = None,
) -> dict[str, Any]:
    """One ``stvqa`` row from its parts (the answer columns derived from the letter).

    ``origin`` is the question's: its scene graph's for a generated row, 'real' for a published one.
    """
    text = options[LETTERS.index(answer)]
    with_options = question_with_options(question, options)
    return {
        "image_id": image_id,
        "images": [dict(image)],
        "problem": problem if problem is not None else problem_text(with_options, width, height),
        "question_only": question,
        "question_with_options": with_options,
        "options": list(options),
        "answer": answer,
        "answer_only": answer,
        "answer_text": text,
        "answer_option_text": f"({answer}) {text}",
        "category": category,
        "level": level,
        "rating": rating,
        "image_width": width,
        "image_height": height,
        "gt_scene": {
            "objects": list(gt_scene.get("objects") or []),
            "relationships": list(gt_scene.get("relationships") or []),
        },
        "split": split,
        "origin": origin,
    }


def build_stvqa(
    validated: pl.DataFrame,
    images: Mapping[str, Mapping[str, Any]],
    settings: StvqaDatasetSettings | None = None,
) -> tuple[pl.DataFrame, QuarantineLog, dict[str, Any]]:
    """Balance, split, shuffle and lay out validated questions as the ``stvqa`` table.

    Args:
        validated (`pl.DataFrame`): ``stvqa_validated`` rows.
        images (`Mapping[str, dict]`): image cell per image id (from ``scene_graphs``).
        settings (`StvqaDatasetSettings`, *optional*): relation share, size, val fraction and seed (see the
            module docstring); the defaults when omitted.

    Returns:
        `(frame, quarantine, report)`: the table, questions whose image is missing, and the quotas.
    """
    settings = settings or StvqaDatasetSettings()
    quarantine = QuarantineLog(SOURCE_ASSET)
    usable = []
    for row in validated.iter_rows(named=True):
        image = images.get(row["image_id"])
        if image is None or not image.get("bytes"):
            quarantine.add(
                row["question_id"],
                "image of the question is missing from scene_graphs",
                payload={"image_id": row["image_id"]},
            )
            continue
        usable.append(row["question_id"])
    selected, quotas = balance_questions(
        validated.filter(pl.col("question_id").is_in(usable)),
        settings.relation_share,
        settings.target_size,
        settings.seed,
    )
    selected = (
        split_by_image(selected, settings.val_fraction, settings.seed)
        if selected.height
        else selected.with_columns(pl.lit("train").alias("split"))
    )
    rows = []
    for row in selected.iter_rows(named=True):
        options, answer = shuffle_options(
            row["question"], row["options"], row["answer"], image_id=row["image_id"], seed=settings.seed
        )
        rows.append(
            stvqa_row(
                image_id=row["image_id"],
                image=images[row["image_id"]],
                width=row["image_width"],
                height=row["image_height"],
                question=row["question"],
                options=options,
                answer=answer,
                category=str(row["category"]),
                level=str(row["level"]),
                rating=row["rating"],
                gt_scene=row["gt_scene"],
                split=row["split"],
                origin=row["origin"],
            )
        )
    frame = pl.DataFrame(rows, schema=polars_schema(Stvqa)) if rows else Stvqa.create_empty()
    order = {category: index for index, category in enumerate(CATEGORIES)}
    frame = (
        frame.sort(
            [
                pl.col("split"),
                pl.col("category").cast(pl.String).replace_strict(order, return_dtype=pl.Int64),
                pl.col("image_id"),
                pl.col("question_only"),
            ]
        )
        if frame.height
        else frame
    )
    return (
        frame,
        quarantine,
        {"quotas": quotas, "available": dict(Counter(validated["category"].cast(pl.String).to_list()))},
    )


# -- the published STVQA-7K -------------------------------------------------------------------------
_SCENE_TAG = re.compile(r"<scene>\s*(.*?)\s*</scene>", re.DOTALL)
_ANSWER_TAG = re.compile(r"<answer>\s*(.*?)\s*</answer>", re.DOTALL)
_IMAGE_SIZE = re.compile(r"Image size:\s*\(\s*(\d+)\s*x\s*(\d+)\s*\)")


def published_files(path: str | Path) -> list[Path]:
    """The Parquet files of a published STVQA-7K copy: the file itself, or every ``*.parquet`` under a folder."""
    location = Path(path)
    if location.is_file():
        return [location]
    if location.is_dir():
        files = sorted(location.rglob("*.parquet"))
        if files:
            return files
    raise FileNotFoundError(
        f"no STVQA-7K Parquet file at {location} (give a .parquet file or a folder holding them)"
    )


def _split_from_name(path: Path) -> str:
    name = path.name.lower()
    return "val" if ("val" in name or "test" in name or "validation" in name) else "train"


def _image_cells(value: Any) -> list[dict[str, Any]]:
    if value is None:
        return []
    if isinstance(value, Mapping):
        return [dict(value)] if value.get("bytes") else []
    if isinstance(value, (list, tuple)):
        return [dict(cell) for cell in value if isinstance(cell, Mapping) and cell.get("bytes")]
    return []


def _options(value: Any) -> list[str]:
    if isinstance(value, str):
        text = value.strip()
        try:
            decoded = json.loads(text)
        except json.JSONDecodeError:
            return []
        return [str(option) for option in decoded] if isinstance(decoded, list) else []
    if isinstance(value, (list, tuple)):
        return [str(option) for option in value]
    return []


def _gold_letter(row: Mapping[str, Any]) -> str | None:
    for name in ("answer_only", "answer"):
        value = row.get(name)
        if not isinstance(value, str):
            continue
        letter = normalize_letter(value)
        if letter is not None:
            return letter
        tag = _ANSWER_TAG.search(value)
        if tag is not None:
            letter = normalize_letter(tag.group(1)) or normalize_letter(tag.group(1).split(" ", 1)[0])
            if letter is not None:
                return letter
    return None


def _published_scene(
    row: Mapping[str, Any], width: int, height: int
) -> tuple[dict[str, Any] | None, int, str | None]:
    """GT scene from a ``<scene>`` tag (pixel boxes -> grid); returns (scene, objects dropped, problem)."""
    candidates = (row.get(name) for name in ("answer", "answer_option_text", "answer_text"))
    text = next((value for value in candidates if isinstance(value, str) and "<scene>" in value), None)
    if text is None:
        return {"objects": [], "relationships": []}, 0, None
    match = _SCENE_TAG.search(text)
    if match is None:
        return None, 0, "unclosed <scene> tag"
    try:
        scene = json.loads(match.group(1))
    except json.JSONDecodeError as error:
        return None, 0, f"<scene> is not valid JSON: {error.msg}"
    if not isinstance(scene, Mapping):
        return None, 0, "<scene> is not a JSON object"
    objects, dropped = [], 0
    for item in scene.get("objects") or []:
        box = item.get("bbox") if isinstance(item, Mapping) else None
        if box is None and isinstance(item, Mapping):
            box = item.get("bbox_2d")
        if box is None:  # no box, or an item that is not an object
            dropped += 1
            continue
        try:
            grid = pixels_to_grid([float(value) for value in box], width, height)
        except (BoxError, TypeError, ValueError):
            dropped += 1
            continue
        objects.append({"id": str(item.get("id") or "object.1"), "bbox_2d": grid})
    relationships = [
        {
            "subject": str(rel.get("subject")),
            "predicate": str(rel.get("predicate")),
            "object": str(rel.get("object")),
        }
        for rel in (scene.get("relationships") or scene.get("relations") or [])
        if isinstance(rel, Mapping) and rel.get("subject") is not None and rel.get("object") is not None
    ]
    return {"objects": objects, "relationships": relationships}, dropped, None


def _image_size(row: Mapping[str, Any], image: Mapping[str, Any]) -> tuple[int, int] | None:
    match = _IMAGE_SIZE.search(str(row.get("problem") or ""))
    if match is not None:
        return int(match.group(1)), int(match.group(2))
    try:
        decoded = decode_image(dict(image))
    except ImageDecodeError:
        return None
    return decoded.size


@dataclass(frozen=True)
class _Rejection:
    """Why a published row is quarantined, and what its quarantine entry shows of it."""

    reason: str
    payload: dict[str, Any]


def _published_choice(row: Mapping[str, Any], image_id: str) -> tuple[list[str], str, str, str] | _Rejection:
    """A published row's options, gold letter, category and level, or why they are unusable."""
    options = [re.sub(r"^\([A-D]\)\s*", "", option).strip() for option in _options(row.get("options"))]
    if not 2 <= len(options) <= 4 or any(not option for option in options):
        return _Rejection(
            f"{len(options)} options; 2 to 4 non-empty options are required", {"image_id": image_id}
        )
    letter = _gold_letter(row)
    if letter is None or LETTERS.index(letter) >= len(options):
        return _Rejection(
            f"gold letter {letter!r} is missing or outside the {len(options)} options",
            {"image_id": image_id, "answer": row.get("answer")},
        )
    category = normalize_category(row.get("category"))
    level = str(row.get("level") or "").strip().lower()
    if category is None or level not in ("easy", "medium", "hard"):
        return _Rejection(
            f"unknown category {row.get('category')!r} or level {row.get('level')!r}", {"image_id": image_id}
        )
    return options, letter, category, level


def _published_row(
    row: Mapping[str, Any], record_id: str, default_split: str, report: dict[str, Any]
) -> dict[str, Any] | _Rejection:
    """One published row as an ``stvqa`` row, or why it is quarantined; its ground-truth objects whose box could
    not be converted are counted in ``report``."""
    image_id = str(row.get("image_id") if row.get("image_id") is not None else record_id)
    cells = _image_cells(row.get("images", row.get("image")))
    if not cells:
        return _Rejection("row has no image bytes", {"image_id": image_id})
    choice = _published_choice(row, image_id)
    if isinstance(choice, _Rejection):
        return choice
    options, letter, category, level = choice
    size = _image_size(row, cells[0])
    if size is None:
        return _Rejection(
            "image size unknown: no 'Image size' line and the image does not decode", {"image_id": image_id}
        )
    width, height = size
    gt_scene, dropped, problem = _published_scene(row, width, height)
    if gt_scene is None:
        return _Rejection(f"ground-truth scene unreadable: {problem}", {"image_id": image_id})
    report["gt_objects_dropped"] += dropped
    question = str(row.get("question_only") or "").strip()
    if not question:
        return _Rejection("row has no question_only", {"image_id": image_id})
    split = str(row.get("split") or default_split).lower()
    split = "val" if split in ("val", "validation", "test") else "train"
    problem_value = row.get("problem")
    if not isinstance(problem_value, str) or not _IMAGE_SIZE.search(problem_value):
        problem_value = None
    return stvqa_row(
        image_id=image_id,
        image=cells[0],
        width=width,
        height=height,
        question=question,
        options=options,
        answer=letter,
        category=category,
        level=level,
        rating=normalize_rating(row.get("rating")),
        gt_scene=gt_scene,
        split=split,
        origin=REAL,
        problem=problem_value,
    )


def read_published_stvqa(path: str | Path) -> tuple[pl.DataFrame, QuarantineLog, dict[str, Any]]:
    """Read the published STVQA-7K Parquet files into ``stvqa`` rows (bad rows quarantined with the reason).

    Args:
        path (`str` or `Path`): a ``.parquet`` file or a folder of them (for example a local copy of the
            data set's ``data/`` folder with ``train-*.parquet`` and ``val-*.parquet``).

    Returns:
        `(frame, quarantine, report)`; the report counts rows per file and ground-truth objects whose box
        could not be converted (dropped from that row's ``gt_scene``).
    """
    quarantine = QuarantineLog(SOURCE_ASSET)
    rows: list[dict[str, Any]] = []
    report: dict[str, Any] = {"files": {}, "gt_objects_dropped": 0}
    for file in published_files(path):
        frame = pl.read_parquet(file)
        report["files"][file.name] = frame.height
        default_split = _split_from_name(file)
        for index, row in enumerate(frame.iter_rows(named=True)):
            record_id = f"{file.name}:{index}"
            converted = _published_row(row, record_id, default_split, report)
            if isinstance(converted, _Rejection):
                quarantine.add(record_id, converted.reason, source_file=str(file), payload=converted.payload)
            else:
                rows.append(converted)
    frame = pl.DataFrame(rows, schema=polars_schema(Stvqa)) if rows else Stvqa.create_empty()
    logger.info("published STVQA: %d rows read, %d quarantined", frame.height, len(quarantine))
    return frame, quarantine, report
