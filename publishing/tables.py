"""The tables that can be published, what their local files say, and their Parquet shards per config and split.

A published table is one config of the repo, named after the table, with one split per value of its ``split``
column (``train`` alone when it has none). Its rows are streamed from the local files row group by row group
(never a whole table in memory), checked against the table's contract, and written as Parquet shards of at
most about ``max_shard_bytes`` each, ``<config>/<split>-0000i-of-0000n.parquet``, with ``datasets`` feature
metadata so images decode on load (:func:`hub_features`). A partitioned
table such as ``dge_tasks`` (one file per scan) becomes a few shards like any other.

``mcq_questions`` stores each image once, in ``mcq_images``, and names it by ``image_sha256``. It is published
as one config, ``mcq_questions``, whose rows carry their image again (:class:`McqQuestionsWithImage`, the
columns the project's readers give): the image table is not a config of its own, since a Hub dataset is read
one config at a time and a question without its pixels is of no use there. The images are put back
:data:`EMBED_ROWS` questions at a time (:func:`data_contracts.image_store.embed_images`), so memory holds one
row group of the questions, one row group of the image table and the images of those few questions; the
published data version is the questions' own (an image is named by the hash of its bytes, so the same
questions name the same pixels).

>>> shard_name("stvqa", "train", 0, 2)
'stvqa/train-00000-of-00002.parquet'
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import BinaryIO

import dataframely as dy
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from data_contracts import dge_tasks, eval_items, mcq_questions, sft_cold_start, spatialcore_train, stvqa
from data_contracts.image_store import IMAGE_KEY, embed_images
from data_contracts.images import to_huggingface_arrow
from data_contracts.parquet_files import (
    DATA_VERSION_KEY,
    ROW_GROUP_BYTES,
    ROW_GROUP_ROWS,
    arrow_frame,
    read_file_metadata,
)
from data_contracts.storage import MissingTableError, table_files, table_path
from data_contracts.validation import check_frame, polars_schema

logger = logging.getLogger(__name__)

EMBED_ROWS = 64
"""Questions whose images are put back at a time when a table that stores its images apart is published."""

DEFAULT_MAX_SHARD_BYTES = 500 << 20
"""Shards hold at most about this many bytes (the Hub's own default for ``push_to_hub``): a shard closes once
it has passed the bound, so it exceeds it by less than one row group."""


class PublishError(ValueError):
    """Why a table or a repo cannot be published, in one sentence."""


@dataclass(frozen=True)
class PublishableTable:
    """A table that can be published: its contract and what the card says about it."""

    name: str
    contract: type[dy.Schema]
    contract_version: str
    method: str
    one_row_is: str
    lineage: tuple[str, ...]
    """The tables of the graph it is built from, in build order, itself last (their quarantines and build
    settings go into the card)."""
    images_from: str | None = None
    """The table that holds the images its rows name by ``image_sha256`` (they are embedded when published)."""


PUBLISHABLE: dict[str, PublishableTable] = {
    table.name: table
    for table in (
        PublishableTable(
            "stvqa",
            stvqa.Stvqa,
            stvqa.CONTRACT_VERSION,
            "SpatialThinker",
            "a multiple-choice spatial question about one image with its ground-truth scene subgraph, in "
            "STVQA-7K's columns (read it like `OX-PIXL/STVQA-7K`: same column names, types and splits)",
            ("scene_graphs", "stvqa_candidates", "stvqa_validated", "stvqa"),
        ),
        PublishableTable(
            "spatialcore_train",
            spatialcore_train.SpatialcoreTrain,
            spatialcore_train.CONTRACT_VERSION,
            "SpatialCORE",
            "a multiple-choice spatial question about one image with its pseudo-ground-truth boxes "
            "(validity = the detector's score)",
            ("mcq_questions", "object_phrases", "pseudo_gt_boxes", "spatialcore_train"),
        ),
        PublishableTable(
            "sft_cold_start",
            sft_cold_start.SftColdStart,
            sft_cold_start.CONTRACT_VERSION,
            "SpatialCORE",
            "a SpatialCORE training question with its supervised cold-start completion (box lines, reasoning, "
            "the letter)",
            ("mcq_questions", "object_phrases", "pseudo_gt_boxes", "spatialcore_train", "sft_cold_start"),
        ),
        PublishableTable(
            "mcq_questions",
            mcq_questions.McqQuestionsWithImage,
            mcq_questions.CONTRACT_VERSION,
            "SpatialCORE sources",
            "a multiple-choice spatial question about one image (OmniSpatial or SpatiaLab, or the sample world's) "
            "with its gold answer, the image embedded (stored once per image in the build's mcq_images)",
            ("mcq_questions",),
            images_from="mcq_images",
        ),
        PublishableTable(
            "dge_tasks",
            dge_tasks.DgeTasks,
            dge_tasks.CONTRACT_VERSION,
            "SpatialEvo DGE",
            "a spatial question about an RGB-D scan (one of 16 task types) whose exact answer was computed "
            "from the scan's geometry, with the facts that justify it",
            ("rgbd_frames", "rgbd_scenes", "scene_geometry", "frame_visibility", "dge_tasks"),
        ),
        PublishableTable(
            "eval_items",
            eval_items.EvalItems,
            eval_items.CONTRACT_VERSION,
            "evaluation",
            "a benchmark item (question, options or numeric answer, images) as the evaluator scores it",
            ("mcq_questions", "eval_items"),
        ),
    )
}


def shard_name(config: str, split: str, index: int, count: int) -> str:
    """The path in the repo of shard ``index`` of ``count`` of a config's split."""
    return f"{config}/{split}-{index:05d}-of-{count:05d}.parquet"


def fingerprint(versions: object) -> str:
    """16 hex digits of the SHA-256 of ``versions`` as sorted JSON (the graph's data-version hash)."""
    return hashlib.sha256(json.dumps(versions, sort_keys=True).encode()).hexdigest()[:16]


def publishable(name: str) -> PublishableTable:
    """The publishable table ``name``, or :class:`PublishError` naming those that are."""
    if name not in PUBLISHABLE:
        raise PublishError(
            f"table {name!r} cannot be published: the publishable tables are {', '.join(PUBLISHABLE)}."
        )
    return PUBLISHABLE[name]


@dataclass(frozen=True)
class LocalTable:
    """What the footers of a built table's files say (nothing but footers is read)."""

    name: str
    files: tuple[Path, ...]
    rows: int
    data_version: str
    contract_version: str | None
    code_versions: tuple[str, ...]
    source_fingerprint: str
    input_data_versions: dict[str, object] = field(default_factory=dict)
    built_at: str = ""
    image_store: Path | None = None
    """The file of the table holding the images the rows name by ``image_sha256`` (embedded when published)."""


def _file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()[:16]


def inspect_table(root: str | Path, name: str) -> LocalTable:
    """The files, row count and provenance of built table ``name`` under ``root``.

    The data version is the file's own (its footer), or, for a partitioned table, a hash of its files'
    versions, as the graph computes it for a table read whole; a file without one contributes its content hash.

    Raises:
        PublishError: the table is not publishable, not built, or has no row.
    """
    spec = publishable(name)
    try:
        files = table_files(root, name)
    except MissingTableError as error:
        raise PublishError(
            f"table {name!r} is not built under {root}: build it first (spatial-build), or give --storage-root."
        ) from error
    image_store = table_path(root, spec.images_from) if spec.images_from else None
    rows, versions, metadata = 0, {}, {}
    for path in files:
        with path.open("rb") as handle:
            parquet = pq.ParquetFile(handle)
            rows += parquet.metadata.num_rows
            columns = parquet.schema_arrow.names
        if IMAGE_KEY in columns and not {"image", "images"} & set(columns):
            if image_store is None:
                raise PublishError(
                    f"table {name!r} references its images by image_sha256 instead of embedding them: publish "
                    "a table that embeds its images."
                )
            if not image_store.is_file():
                raise PublishError(
                    f"table {name!r} names its images by image_sha256 but {spec.images_from} is not built "
                    f"under {root}: build it first (spatial-build), or give --storage-root."
                )
        metadata[path.stem] = read_file_metadata(path)
        versions[path.stem] = metadata[path.stem].get(DATA_VERSION_KEY) or _file_sha256(path)
    if rows == 0:
        raise PublishError(f"table {name!r} under {root} has no row: there is nothing to publish.")
    single = len(files) == 1 and files[0].parent == Path(root)
    first = next(iter(metadata.values()))
    inputs = {
        stem: json.loads(values.get("input_data_versions") or "{}") for stem, values in metadata.items()
    }
    return LocalTable(
        name=name,
        files=tuple(files),
        rows=rows,
        data_version=next(iter(versions.values())) if single else fingerprint(versions),
        contract_version=first.get("contract_version") or spec.contract_version,
        code_versions=tuple(sorted({v["code_version"] for v in metadata.values() if v.get("code_version")})),
        source_fingerprint=(
            first.get("source_fingerprint") or ""
            if single
            else fingerprint({stem: values.get("source_fingerprint") for stem, values in metadata.items()})
        ),
        input_data_versions=next(iter(inputs.values())) if single else inputs,
        built_at=datetime.fromtimestamp(max(path.stat().st_mtime for path in files), UTC).strftime(
            "%Y-%m-%d %H:%M UTC"
        ),
        image_store=image_store if image_store is not None and image_store.is_file() else None,
    )


def iter_row_groups(
    files: tuple[Path, ...] | list[Path], columns: list[str] | None = None
) -> Iterator[pl.DataFrame]:
    """The rows of ``files`` one row group at a time (each file read through one open handle)."""
    for path in files:
        with path.open("rb") as handle:
            parquet = pq.ParquetFile(handle)
            for index in range(parquet.num_row_groups):
                # polars makes a DataFrame of an Arrow table (a Series only of an Arrow array)
                yield arrow_frame(parquet.read_row_group(index, columns=columns))


@dataclass(frozen=True)
class Shard:
    """A Parquet shard written for the repo."""

    path_in_repo: str
    local_path: Path
    split: str
    rows: int
    size: int


def hub_features(schema: pl.Schema):
    """The ``datasets`` features a published table's shards carry: the contract's columns, images as ``Image``,
    text as ``string`` and lists as ``List`` (the types most Hub datasets use, STVQA-7K's included), where the
    local files keep polars' large types."""
    from datasets import Features, LargeList, List, Value

    def regular(feature):
        if isinstance(feature, Value) and feature.dtype == "large_string":
            return Value("string")
        if isinstance(feature, Value) and feature.dtype == "large_binary":
            return Value("binary")
        if isinstance(feature, (LargeList, List)):
            return List(regular(feature.feature))
        if isinstance(feature, dict):
            return {name: regular(value) for name, value in feature.items()}
        return feature

    local = to_huggingface_arrow(pl.DataFrame(schema=schema)).schema
    return Features({name: regular(feature) for name, feature in Features.from_arrow_schema(local).items()})


class _SplitWriter:
    """Writes one split's shards, starting a new one once the current one has passed the size bound."""

    def __init__(self, folder: Path, split: str, schema: pa.Schema, limit: int):
        self.folder, self.split, self.schema, self.limit = folder, split, schema, limit
        self.done: list[tuple[Path, int]] = []
        self._shard: tuple[BinaryIO, pq.ParquetWriter] | None = None  # the open shard's file and writer
        self._rows = 0

    def write(self, frame: pl.DataFrame) -> None:
        if self._shard is None:
            path = self.folder / f".{self.split}-{len(self.done):05d}.partial"
            opened = path.open("wb")
            self._shard = (opened, pq.ParquetWriter(opened, self.schema, compression="zstd"))
            self._rows = 0
        handle, writer = self._shard
        table = to_huggingface_arrow(frame).cast(self.schema)
        row_bytes = max(1, table.nbytes // max(1, table.num_rows))
        writer.write_table(table, row_group_size=max(1, min(ROW_GROUP_ROWS, ROW_GROUP_BYTES // row_bytes)))
        self._rows += table.num_rows
        if handle.tell() >= self.limit:
            self.close()

    def close(self) -> None:
        if self._shard is not None:
            handle, writer = self._shard
            writer.close()
            handle.close()
            self.done.append((Path(handle.name), self._rows))
            self._shard = None


def _as_contract_types(frame: pl.DataFrame, schema: pl.Schema) -> pl.DataFrame:
    """``frame`` with the contract's columns cast to its types (Parquet keeps an enum as text); a column that
    does not cast is left as it is, for the contract check to report."""
    casts = []
    for name, dtype in schema.items():
        if name in frame.columns and frame.schema[name] != dtype:
            try:
                casts.append(frame[name].cast(dtype))
            except pl.exceptions.InvalidOperationError:
                continue
    return frame.with_columns(casts) if casts else frame


def _with_images(frames: Iterator[pl.DataFrame], store: Path | None) -> Iterator[pl.DataFrame]:
    """``frames``, with the images their rows name by ``image_sha256`` embedded from the image table ``store``
    :data:`EMBED_ROWS` rows at a time (unchanged when they embed theirs already or there is no store)."""
    for frame in frames:
        if store is None or "image" in frame.columns or IMAGE_KEY not in frame.columns:
            yield frame
            continue
        for start in range(0, frame.height, EMBED_ROWS):
            yield embed_images(frame.slice(start, EMBED_ROWS), store)


def write_shards(
    table: LocalTable, folder: str | Path, max_shard_bytes: int = DEFAULT_MAX_SHARD_BYTES
) -> list[Shard]:
    """Stream ``table`` into Parquet shards per split under ``folder/<table>/``, checking its contract.

    Every row group is checked against the table's contract before it is written; the first one that fails
    stops the whole table (:class:`PublishError` naming the rules broken), so nothing of it is published.
    """
    spec = publishable(table.name)
    schema = polars_schema(spec.contract)
    target = Path(folder) / table.name
    target.mkdir(parents=True, exist_ok=True)
    metadata = {
        "contract_version": table.contract_version or spec.contract_version,
        DATA_VERSION_KEY: table.data_version,
        "source_fingerprint": table.source_fingerprint,
        "code_version": ",".join(table.code_versions),
    }
    arrow_schema = hub_features(schema).arrow_schema
    arrow_schema = arrow_schema.with_metadata(
        {**(arrow_schema.metadata or {}), **{key.encode(): value.encode() for key, value in metadata.items()}}
    )
    writers: dict[str, _SplitWriter] = {}
    for frame in _with_images(iter_row_groups(table.files), table.image_store):
        report = check_frame(_as_contract_types(frame, schema), spec.contract)
        if not report.passed:
            problems = {
                **report.failure_counts,
                **{f"missing column {name}": 1 for name in report.missing_columns},
                **{f"column {name}: {why}": 1 for name, why in report.type_mismatches.items()},
            }
            raise PublishError(
                f"table {table.name!r} fails its contract checks ({spec.contract.__name__}: "
                f"{', '.join(f'{rule}: {count}' for rule, count in sorted(problems.items()))}): rebuild it."
            )
        frame = _as_contract_types(frame, schema).select(list(schema))
        parts = frame.partition_by("split", as_dict=True) if "split" in schema else {("train",): frame}
        for (split,), part in parts.items():
            if split not in writers:
                writers[split] = _SplitWriter(target, str(split), arrow_schema, max_shard_bytes)
            writers[split].write(part)
    shards = []
    for split, writer in sorted(writers.items()):
        writer.close()
        for index, (partial, rows) in enumerate(writer.done):
            name = shard_name(table.name, split, index, len(writer.done))
            final = Path(folder) / name
            os.replace(partial, final)
            shards.append(Shard(name, final, split, rows, final.stat().st_size))
    logger.info(
        "%s: %d rows in %d shards (%s)",
        table.name,
        sum(shard.rows for shard in shards),
        len(shards),
        ", ".join(f"{split} {sum(s.rows for s in shards if s.split == split)}" for split in writers),
    )
    return shards
