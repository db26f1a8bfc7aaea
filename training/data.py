"""Training tables (Parquet) -> `datasets.Dataset` with prompts, images decoded lazily.

A table is read from `<data_root>/<table>.parquet` or from the partition files of
`<data_root>/<table>/`; a `data_root` on the Hub (`hf://datasets/OWNER/NAME[@REV]`, a repo that
`spatial-publish` wrote) is read from its snapshot in the Hub cache (`training.hub_data`). Every column reaches the reward functions unchanged; the loader only adds a
`prompt` column (the conversational prompt of the recipe's format, see `training.prompts`) and marks
the image columns (`image`, `images`) as `datasets.Image` features, so an image is decoded when its
row is read, not before.

Rows that cannot be trained on (no image bytes, bytes that are not an image, a gold letter outside
the options, no gold value) are quarantined with a reason, never crash the run; the good rows go on.

Clear errors: a missing table names the path and the tables that do exist; a missing column names
the table, the columns the format needs and the columns present.

Origins: a table with an `origin` column (every SpatialCORE table, `stvqa` and `dge_tasks`) never
mixes the built-in sample world with real data silently: such a table is refused unless
`allow_mixed_origins` is set, and a table made only of sample-world rows is logged as synthetic.

>>> FORMAT_OF_TABLE["stvqa"]
'spatialthinker'
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
from datasets import Dataset
from datasets.table import InMemoryTable

from data_contracts.images import IMAGE_DTYPE, sniff_format, to_huggingface_arrow
from data_contracts.origin import SAMPLE_WORLD
from data_contracts.parquet_files import arrow_frame
from data_contracts.quarantine import QuarantineLog
from data_contracts.storage import table_files
from training.hub_data import resolve_data_root
from training.prompts import FORMAT_OF_TABLE as FORMAT_OF_TABLE  # re-exported: the table -> format map
from training.prompts import build_messages
from training.rewards.parsing import gold_option_letter

logger = logging.getLogger(__name__)

RECORD_ID_COLUMNS = ("question_id", "task_id", "image_id")
SOURCE_FILE_COLUMN = "__source_file"
_SIGNATURE_BYTES = 16

# Columns each format's prompts and rewards read.
REQUIRED_COLUMNS = {
    "spatialcore": (
        "question_id",
        "image",
        "image_width",
        "image_height",
        "question",
        "options",
        "answer",
        "task_type",
        "pseudo_gt",
    ),
    "spatialthinker": ("image_id", "images", "image_width", "image_height", "answer_option_text", "gt_scene"),
    "dge": ("task_id", "images", "question", "options", "answer", "numeric_answer", "unit", "task_type"),
}


class MissingColumnError(ValueError):
    """A training table without a column the recipe needs."""


class MixedOriginError(ValueError):
    """A training table whose rows come from both the built-in sample world and a real data set."""


@dataclass
class TrainingData:
    """A loaded training table.

    Attributes:
        dataset: the rows to train on, with a `prompt` column.
        quarantine: rejected rows (`data_contracts.quarantine` columns).
        source_files: the Parquet files read.
        origins: rows per `origin` ('sample_world' or 'real') of the rows kept; empty when the table has
            no `origin` column.
    """

    dataset: Dataset
    quarantine: pl.DataFrame
    source_files: list[Path]
    origins: dict[str, int] = field(default_factory=dict)


def check_origins(table: str, frame: pl.DataFrame, allow_mixed: bool = False) -> dict[str, int]:
    """Rows per `origin` of a training table; raises `MixedOriginError` when it mixes the sample world with
    real data (unless `allow_mixed`), and logs a warning when every row is synthetic.

    >>> check_origins("t", pl.DataFrame({"origin": ["real", "real"]}))
    {'real': 2}
    >>> check_origins("t", pl.DataFrame({"a": [1]}))
    {}
    """
    if "origin" not in frame.columns:
        return {}
    counts = {
        str(origin): int(count) for origin, count in frame["origin"].value_counts(sort=True).iter_rows()
    }
    if len(counts) > 1 and not allow_mixed:
        raise MixedOriginError(
            f"table {table!r} mixes rows of different origins ({', '.join(f'{n} {o}' for o, n in counts.items())}): "
            "the built-in sample world stands in for a source only when no real one is configured, so rebuild "
            "the table from real sources only, or set allow_mixed_origins: true to train on both"
        )
    if set(counts) == {SAMPLE_WORLD}:
        logger.warning(
            "every row of %s comes from the built-in synthetic sample world (%d rows): fine for a smoke run, "
            "not for a real one (configure real sources in the pipeline and rebuild)",
            table,
            counts[SAMPLE_WORLD],
        )
    return counts


def check_columns(table: str, present: list[str], required: tuple[str, ...] | list[str]) -> None:
    """Raise `MissingColumnError` when a required column is absent."""
    missing = [column for column in required if column not in present]
    if missing:
        raise MissingColumnError(
            f"table {table!r} lacks column(s) {', '.join(missing)} that the recipe needs; "
            f"present: {', '.join(present)}"
        )


def _image_problem(cell: Any) -> str | None:
    if cell is None:
        return "no image"
    data = cell.get("bytes") if isinstance(cell, dict) else None
    if not data:
        return "image has no bytes"
    if sniff_format(data) is None:
        return f"image {cell.get('path')!r} bytes are not a known image format"
    return None


def _positive(value: Any) -> bool:
    return (
        isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value > 0
    )


def row_problem(row: dict, prompt_format: str) -> str | None:
    """Why a row cannot be trained on, or `None` when it is fine.

    >>> row_problem({"image": None, "question": "q", "options": ["a"], "answer": "A",
    ...              "image_width": 4, "image_height": 3}, "spatialcore")
    'no image'
    """
    if "images" in row and prompt_format != "spatialcore":
        images = row.get("images")
        if not images:
            return "no images"
        for cell in images:
            problem = _image_problem(cell)
            if problem:
                return problem
    else:
        problem = _image_problem(row.get("image"))
        if problem:
            return problem
    if prompt_format in ("spatialcore", "spatialthinker"):
        if not (_positive(row.get("image_width")) and _positive(row.get("image_height"))):
            return f"image size {row.get('image_width')}x{row.get('image_height')} is not positive"
    if prompt_format in ("spatialcore", "dge") and not str(row.get("question") or "").strip():
        return "empty question"
    options = row.get("options") or []
    if prompt_format == "spatialcore" or (prompt_format == "dge" and options):
        try:
            gold_option_letter(row.get("answer"), len(options))
        except ValueError as error:
            return f"gold answer: {error}"
    if prompt_format == "dge" and not options:
        numeric = row.get("numeric_answer")
        if (
            not (isinstance(numeric, (int, float)) and math.isfinite(numeric))
            and not str(row.get("answer") or "").strip()
        ):
            return "numeric task without a gold value"
    if prompt_format == "spatialthinker":
        if not str(row.get("answer_option_text") or "").strip():
            return "empty answer_option_text"
        if row.get("gt_scene") is None:
            return "no gt_scene"
    return None


def _payload(row: dict) -> dict:
    return {
        key: value
        for key, value in row.items()
        if key not in ("image", "images") and not isinstance(value, (bytes, bytearray))
    }


def load_training_data(
    data_root: str | Path,
    table: str,
    prompt_format: str,
    family: str,
    split: str | None = "train",
    extra_columns: tuple[str, ...] = (),
    max_samples: int | None = None,
    include_task_types: list[str] | None = None,
    task_type_column: str = "task_type",
    allow_mixed_origins: bool = False,
) -> TrainingData:
    """Load a training table as a `datasets.Dataset` with a `prompt` column.

    Args:
        data_root (`str` or `Path`): storage root holding the table (a local folder or a Hub dataset
            `hf://datasets/OWNER/NAME[@REV]`).
        table (`str`): table name (`spatialcore_train`, `stvqa`, `dge_tasks`, or another with the columns).
        prompt_format (`str`): `spatialcore`, `spatialthinker` or `dge`.
        family (`str`): the model family (coordinate convention of the prompt).
        split (`str`, *optional*, defaults to `"train"`): keep rows whose `split` is this; `None` keeps all.
        extra_columns (`tuple[str, ...]`): further columns the run needs (e.g. the task-type column).
        max_samples (`int`, *optional*): keep the first N good rows.
        include_task_types (`list[str]`, *optional*): keep only rows of these task types (e.g. the
            paper's ablations train on OmniSpatial's `Spatial_Interaction` rows).
        task_type_column (`str`, *optional*, defaults to `"task_type"`): column of the task type.
        allow_mixed_origins (`bool`, *optional*, defaults to `False`): accept a table whose `origin`
            column mixes sample-world and real rows (see `check_origins`).

    Returns:
        [`TrainingData`]

    Raises:
        `MissingTableError`, `MissingColumnError`, `MixedOriginError`, `ValueError` (no usable row),
        `MissingInputError` (a Hub table not fetched), `IncompatibleContractError`.
    """
    if prompt_format not in REQUIRED_COLUMNS:
        raise ValueError(
            f"unknown prompt format {prompt_format!r}; expected one of {', '.join(REQUIRED_COLUMNS)}"
        )
    files = table_files(resolve_data_root(data_root, [table]), table)
    parts = []
    for path in files:
        part = pq.read_table(path)
        parts.append(
            part.append_column(SOURCE_FILE_COLUMN, pa.array([str(path)] * part.num_rows, pa.string()))
        )
    arrow = pa.concat_tables(parts, promote_options="default")
    needed = tuple(REQUIRED_COLUMNS[prompt_format]) + tuple(extra_columns)
    if include_task_types:
        needed += (task_type_column,)
    check_columns(table, [c for c in arrow.column_names if c != SOURCE_FILE_COLUMN], needed)
    frame = arrow_frame(arrow)
    if split is not None and "split" in frame.columns:
        frame = frame.filter(pl.col("split") == split)
    if include_task_types:
        frame = frame.filter(pl.col(task_type_column).is_in(list(include_task_types)))
    image_columns: list[str] = [name for name in ("image", "images") if name in frame.columns]
    for name in image_columns:
        dtype = frame.schema[name]
        expected = IMAGE_DTYPE if name == "image" else pl.List(IMAGE_DTYPE)
        if dtype != expected:
            raise MissingColumnError(f"table {table!r} column {name!r} has type {dtype}, expected {expected}")

    id_column = next((column for column in RECORD_ID_COLUMNS if column in frame.columns), None)
    quarantine = QuarantineLog(f"{table}_training")
    keep, prompts = [], []
    for index, row in enumerate(_rows_for_checks(frame, image_columns)):
        source_file = row.pop(SOURCE_FILE_COLUMN)
        problem = row_problem(row, prompt_format)
        if problem is None:
            try:
                prompts.append(build_messages(prompt_format, row, family))
            except (ValueError, KeyError, TypeError) as error:
                problem = f"prompt: {error}"
        if problem is not None:
            record_id = row.get(id_column) if id_column else index
            quarantine.add(record_id, problem, source_file=source_file, payload=_payload(row))
            continue
        keep.append(index)
        if max_samples is not None and len(keep) >= max_samples:
            break
    if quarantine:
        logger.warning("quarantined %d rows of %s: %s", len(quarantine), table, quarantine.reason_counts())
    if not keep:
        raise ValueError(
            f"table {table!r} has no usable rows (split={split!r}); {len(quarantine)} quarantined"
        )
    good = frame[keep].drop(SOURCE_FILE_COLUMN)
    origins = check_origins(table, good, allow_mixed_origins)
    table_arrow = to_huggingface_arrow(good)
    table_arrow = table_arrow.append_column("prompt", pa.array(prompts))
    dataset = Dataset(InMemoryTable(table_arrow))
    logger.info("loaded %d rows of %s from %s", len(dataset), table, ", ".join(map(str, files)))
    return TrainingData(
        dataset=dataset, quarantine=quarantine.to_frame(), source_files=files, origins=origins
    )


def _rows_for_checks(frame: pl.DataFrame, image_columns: list[str]):
    """Rows as dicts whose image cells hold only the first bytes (enough to recognise the format).

    The image bytes are never copied into Python objects whole, so checking a large table is cheap.
    """
    heads = []
    for name in image_columns:
        if name == "image":
            cell = pl.struct(
                pl.col(name).struct.field("bytes").bin.head(_SIGNATURE_BYTES).alias("bytes"),
                pl.col(name).struct.field("path").alias("path"),
            )
            heads.append(pl.when(pl.col(name).is_null()).then(None).otherwise(cell).alias(name))
        else:
            heads.append(
                pl.col(name)
                .list.eval(
                    pl.struct(
                        pl.element().struct.field("bytes").bin.head(_SIGNATURE_BYTES).alias("bytes"),
                        pl.element().struct.field("path").alias("path"),
                    )
                )
                .alias(name)
            )
    return frame.with_columns(heads).iter_rows(named=True) if heads else frame.iter_rows(named=True)


def task_types_of(dataset: Dataset, column: str) -> list[str]:
    """The task type of every row (reads only that column)."""
    return [str(value) for value in dataset.select_columns([column])[column]]


def write_quarantine(quarantine: pl.DataFrame, output_dir: str | Path, table: str) -> Path | None:
    """Write the quarantined rows to `<output_dir>/<table>_training_quarantine.parquet` (if any)."""
    if quarantine.height == 0:
        return None
    path = Path(output_dir) / f"{table}_training_quarantine.parquet"
    path.parent.mkdir(parents=True, exist_ok=True)
    quarantine.write_parquet(path)
    return path
