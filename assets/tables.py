"""Turning a computed frame into a checked, documented cache: contract split, metadata, check result.

Every asset that writes a table goes through :func:`finalize_table`: rows that break the contract
are moved to the quarantine (never silently dropped), the valid rows are returned for the IO
manager, and the metadata carries the row count, the contract version, the column schema, a
Markdown preview and, where the table has boxes, a preview image with the boxes drawn.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dagster as dg
import dataframely as dy
import polars as pl
import pyarrow as pa

from assets.previews import markdown_image, markdown_preview, save_preview
from data_contracts.quarantine import CONTRACT_VERSION as QUARANTINE_CONTRACT_VERSION
from data_contracts.quarantine import Quarantine, QuarantineLog
from data_contracts.storage import safe_partition_name
from data_contracts.validation import split_valid
from model_clients.client import LLMClient, UsageSummary
from model_clients.failures import FailureBudgetSettings, failure_budget_message, failure_metadata
from readers.common import EmptySourceError, MissingInputError

CONTRACT_CHECK = "contract"
EMPTY_REASON_KEY = "empty_because"
"""Materialization metadata entry in which an asset says why its table has no rows (an optional stage that is
off until configured); ``spatial-build``'s summary shows it beside the table."""


@dataclass
class CheckedTable:
    """A frame that satisfies its contract, with its metadata and check result."""

    frame: pl.DataFrame
    metadata: dict[str, Any]
    check: dg.AssetCheckResult


def column_schema(contract: type[dy.Schema]) -> dg.TableSchema:
    """The contract as a Dagster ``TableSchema`` (shown in the UI's column view)."""
    columns = []
    for name, column in contract.columns().items():
        description = (column.description or "") + (" (primary key)" if column.primary_key else "")
        columns.append(
            dg.TableColumn(
                name=name,
                type=str(column.dtype),
                description=description or None,
                constraints=dg.TableColumnConstraints(
                    nullable=bool(column.nullable), unique=bool(column.primary_key)
                ),
            )
        )
    return dg.TableSchema(columns=columns)


def finalize_table(
    frame: pl.DataFrame,
    contract: type[dy.Schema],
    contract_version: str,
    *,
    asset_key: str | dg.AssetKey,
    quarantine: QuarantineLog | None = None,
    record_id_column: str | None = None,
    preview_columns: Iterable[str] | None = None,
    preview_image: Callable[[pl.DataFrame], Any] | None = None,
    storage_root: str | Path | None = None,
    extra_metadata: dict[str, Any] | None = None,
    partition_key: str | None = None,
) -> CheckedTable:
    """Split ``frame`` by ``contract``, send invalid rows to ``quarantine``, and build metadata and the check.

    With ``storage_root``, the preview image is also written to ``<root>/previews/<asset>.png``, or
    ``<asset>__<partition>.png`` for one partition (``partition_key``), so the previews of the partitions
    of one asset do not overwrite each other. A table too large to hold goes through :class:`StreamedTable`.
    """
    table = StreamedTable(
        contract,
        contract_version,
        asset_key=asset_key,
        quarantine=quarantine,
        record_id_column=record_id_column,
        preview_columns=preview_columns,
        preview_image=preview_image,
        storage_root=storage_root,
        partition_key=partition_key,
        preview_rows=frame.height,  # the whole table is in hand: its previews see every row
    )
    valid = table.check(frame)
    metadata, check = table.finish(extra_metadata)
    return CheckedTable(frame=valid, metadata=metadata, check=check)


class StreamedTable:
    """A table checked against its contract batch by batch, for a step that writes it as it reads it.

    :meth:`check` returns a batch's contract-valid rows (the invalid ones go to ``quarantine`` with the rules
    they broke; a primary key already seen in an earlier batch is invalid too) and keeps the first rows for
    the preview; :meth:`finish` gives the metadata and the contract check of the whole table, as
    :func:`finalize_table` gives them for a table held whole.
    """

    def __init__(
        self,
        contract: type[dy.Schema],
        contract_version: str,
        *,
        asset_key: str | dg.AssetKey,
        quarantine: QuarantineLog | None = None,
        record_id_column: str | None = None,
        preview_columns: Iterable[str] | None = None,
        preview_image: Callable[[pl.DataFrame], Any] | None = None,
        storage_root: str | Path | None = None,
        partition_key: str | None = None,
        preview_rows: int = 20,
    ) -> None:
        self.contract, self.contract_version = contract, contract_version
        self.key = dg.AssetKey(asset_key) if isinstance(asset_key, str) else asset_key
        self.quarantine = quarantine
        self.record_id_column = record_id_column or next(iter(contract.primary_key()), None)
        self.preview_columns = list(preview_columns) if preview_columns else None
        self.preview_image, self.storage_root, self.partition_key = preview_image, storage_root, partition_key
        self.rows = 0
        self.invalid_rows = 0
        self.failure_counts: Counter[str] = Counter()
        self.head: pl.DataFrame | None = None
        self._preview_rows = preview_rows
        self._primary_key = list(contract.primary_key())
        self._seen_keys: set[tuple] = set()

    def check(self, frame: pl.DataFrame) -> pl.DataFrame:
        """The contract-valid rows of ``frame`` (the others quarantined)."""
        valid, invalid, failure_counts = split_valid(frame, self.contract)
        if self._primary_key and valid.height:
            keys = valid.select(self._primary_key).rows()
            repeated = [key in self._seen_keys for key in keys]
            if any(repeated):
                mask = pl.Series(repeated)
                invalid = pl.concat(
                    [invalid, valid.filter(mask).with_columns(reason=pl.lit("primary_key"))],
                    how="diagonal_relaxed",
                )
                failure_counts = {
                    **failure_counts,
                    "primary_key": failure_counts.get("primary_key", 0) + sum(repeated),
                }
                valid = valid.filter(~mask)
            self._seen_keys.update(key for key, seen in zip(keys, repeated, strict=True) if not seen)
        if self.quarantine is not None and invalid.height:
            for row in invalid.iter_rows(named=True):
                record = {k: v for k, v in row.items() if not isinstance(v, (bytes, dict))}  # no image bytes
                self.quarantine.add(
                    "?" if self.record_id_column is None else row.get(self.record_id_column, "?"),
                    f"contract violation: {row['reason']}",
                    payload=record,
                )
        self.rows += valid.height
        self.invalid_rows += invalid.height
        self.failure_counts.update(failure_counts)
        if self.head is None or self.head.height < max(1, self._preview_rows):
            taken = valid.head(self._preview_rows - (0 if self.head is None else self.head.height))
            self.head = taken if self.head is None else pl.concat([self.head, taken])
        return valid

    def finish(
        self, extra_metadata: dict[str, Any] | None = None
    ) -> tuple[dict[str, Any], dg.AssetCheckResult]:
        """The table's materialization metadata and its contract check result."""
        head = self.head if self.head is not None else self.contract.create_empty()
        metadata: dict[str, Any] = {
            "dagster/row_count": self.rows,
            "contract_version": self.contract_version,
            "contract": self.contract.__name__,
            "dagster/column_schema": column_schema(self.contract),
            "preview": dg.MetadataValue.md(markdown_preview(head, columns=self.preview_columns)),
        }
        if self.quarantine is not None:
            metadata["quarantined"] = len(self.quarantine)
            metadata["quarantine_reasons"] = dg.MetadataValue.json(self.quarantine.reason_counts())
        if self.preview_image is not None and head.height:
            image = self.preview_image(head)
            if image is not None:
                metadata["preview_image"] = dg.MetadataValue.md(
                    markdown_image(image, alt=self.key.to_user_string())
                )
                if self.storage_root is not None:
                    name = self.key.to_python_identifier()
                    if self.partition_key is not None:
                        name = f"{name}__{safe_partition_name(self.partition_key)}"
                    metadata["preview_image_path"] = dg.MetadataValue.path(
                        str(save_preview(image, self.storage_root, name))
                    )
        metadata.update(extra_metadata or {})
        # Bad input is caught (and explained) by the producing code before this point; a row that still
        # breaks the contract here means that code is wrong, so the check fails and blocks downstream
        # assets. The row itself is kept in the quarantine, never lost.
        check = dg.AssetCheckResult(
            asset_key=self.key,
            check_name=CONTRACT_CHECK,
            passed=self.invalid_rows == 0,
            metadata={
                "contract_version": self.contract_version,
                "valid_rows": self.rows,
                "rows_moved_to_quarantine": self.invalid_rows,
                "failures_by_rule": dg.MetadataValue.json(dict(self.failure_counts)),
            },
        )
        return metadata, check


def table_and_quarantine_outs(
    name: str, description: str, code_version: str, quarantine_description: str | None = None
) -> dict[str, dg.AssetOut]:
    """The two outputs of an asset that writes a table: ``name`` and ``<name>_quarantine``.

    ``quarantine_description`` says what the quarantine holds; a generic sentence when omitted.

    >>> sorted(table_and_quarantine_outs("stvqa", "The data set.", "1"))
    ['stvqa', 'stvqa_quarantine']
    >>> table_and_quarantine_outs("stvqa", "The data set.", "1")["stvqa_quarantine"].description
    'Records rejected while building stvqa, with the reason.'
    """
    return {
        name: dg.AssetOut(description=description, code_version=code_version),
        f"{name}_quarantine": dg.AssetOut(
            description=quarantine_description or f"Records rejected while building {name}, with the reason.",
            code_version=code_version,
        ),
    }


def upstream_table_location(context: dg.AssetExecutionContext, asset_key: str) -> str:
    """Where the IO manager stored an upstream table: the ``path`` of its latest materialisation.

    For quarantine rows that name the file a bad record came from; the asset key when no path is recorded
    (a table written outside Dagster, or another instance).
    """
    event = context.instance.get_latest_materialization_event(dg.AssetKey(asset_key))
    materialization = event.asset_materialization if event is not None else None
    path = materialization.metadata.get("path") if materialization is not None else None
    return str(path.value) if path is not None else asset_key


CHECKED_WITH_ITS_TABLE = dg.AutomationCondition.any_deps_match(
    dg.AutomationCondition.will_be_requested()
).with_label("its table is requested")
"""The automation condition of every contract check: requested exactly when its table is (the check runs in the
table's own step, so it can never be requested without it).

It is what makes the automation's runs carry every other check of the table too. The daemon's run for one
scan or for the unpartitioned tables lists the checks it requested; a contract check is always among them (it
is part of its table's step), and without a condition of its own it made that list the whole selection, so
the operator signals (``pipelines.signals``, no condition of their own) were left out of every run but a
backfill. When a check of the selected tables has a condition, Dagster adds the checks that have none to the
run, as a run launched from the UI or by ``spatial-build`` has them (``pipelines/README.md``, "Operator signals")."""


def contract_check_specs(*asset_keys: str) -> list[dg.AssetCheckSpec]:
    """Blocking contract checks for the given assets (requested with their table: :data:`CHECKED_WITH_ITS_TABLE`)."""
    return [
        dg.AssetCheckSpec(
            CONTRACT_CHECK,
            asset=key,
            blocking=True,
            description="Every row satisfies the table's contract.",
            automation_condition=CHECKED_WITH_ITS_TABLE,
        )
        for key in asset_keys
    ]


def fingerprint_paths(paths: Iterable[str | Path]) -> str:
    """A cheap content fingerprint of files/folders (names, sizes, modification times).

    Used as the data version of source assets, so unchanged raw inputs leave downstream assets fresh.
    """
    digest = hashlib.sha256()
    for root in sorted(str(p) for p in paths if p is not None):
        path = Path(root)
        if path.is_file():
            entries = [path]
        elif path.is_dir():
            entries = sorted(p for p in path.rglob("*") if p.is_file())
        else:
            entries = []
        for entry in entries:
            stat = os.stat(entry)
            digest.update(f"{entry}|{stat.st_size}|{stat.st_mtime_ns}\n".encode())
    return digest.hexdigest()[:16]


def quarantine_output(log: QuarantineLog) -> tuple[pl.DataFrame, dict[str, Any]]:
    """The quarantine table of an asset and its metadata."""
    frame = log.to_frame()
    metadata = {
        "dagster/row_count": frame.height,
        "contract_version": QUARANTINE_CONTRACT_VERSION,
        "dagster/column_schema": column_schema(Quarantine),
        "reasons": dg.MetadataValue.json(log.reason_counts()),
        "preview": dg.MetadataValue.md(
            markdown_preview(frame, limit=10, columns=["record_id", "source_file", "reason"])
        ),
    }
    return frame, metadata


def value_counts(frame: pl.DataFrame, column: str) -> dict[str, int]:
    """Row counts per value of ``column`` (for metadata such as rows per split or per task type)."""
    return {str(value): int(count) for value, count in frame.group_by(column).len().sort(column).iter_rows()}


def json_metadata(value: Any) -> dg.MetadataValue:
    """JSON metadata that tolerates numpy scalars."""
    return dg.MetadataValue.json(json.loads(json.dumps(value, default=float)))


def input_failure(error: MissingInputError | EmptySourceError, **metadata: Any) -> dg.Failure:
    """The step failure of bad source input: the error's one sentence as the description, the input as metadata.

    Raise it in place of a reader's :class:`~readers.common.MissingInputError` or
    :class:`~readers.common.EmptySourceError` (``raise input_failure(error) from None``), before any output is
    yielded: the UI then shows the sentence (what, where, which config field) instead of a stack trace, the IO
    manager keeps the previous table, and the step's checks show as not executed, never as failed.

    The metadata holds what the error knows, ``input_location``, ``config_field``, ``quarantined`` and
    ``first_reasons`` (those of an input whose every record was quarantined), then ``metadata`` (for instance
    the scan folder of one partition).

    >>> from readers.common import EmptySourceError
    >>> failure = input_failure(EmptySourceError("SpatiaLab at /d holds no record.", location="/d",
    ...                                          config_field="spatialab_path"), scan="scene0000_00")
    >>> failure.description, sorted(failure.metadata)
    ('SpatiaLab at /d holds no record.', ['config_field', 'input_location', 'quarantined', 'scan'])
    """
    entries: dict[str, Any] = {}
    location = getattr(error, "location", None)
    if location is not None:
        entries["input_location"] = (
            dg.MetadataValue.text(location) if location.startswith("hf:") else dg.MetadataValue.path(location)
        )
    config_field = getattr(error, "config_field", None)
    if config_field is not None:  # two fields are named "a` / `b" inside the sentence's backquotes
        entries["config_field"] = config_field.replace("` / `", " / ")
    if isinstance(error, EmptySourceError):
        entries["quarantined"] = error.quarantined
        if error.first_reasons:
            entries["first_reasons"] = dg.MetadataValue.json(error.first_reasons)
    entries.update(metadata)
    return dg.Failure(description=str(error), metadata=entries)


def llm_failure_check(
    usage: LLMClient | UsageSummary | None, settings: FailureBudgetSettings, stage: str, resource: str
) -> dict:
    """The failure counts for the metadata; ``dagster.Failure`` when too many of the requests failed.

    ``usage`` is the stage's client (its whole summary) or the summary of one shard's requests (a stage whose
    shards share a client). The failure says what failed and how to re-run (the response cache keeps every good
    answer).
    """
    if usage is None:
        return {}
    summary = usage.summary if isinstance(usage, LLMClient) else usage
    metadata = failure_metadata(summary, settings.max_failure_fraction)
    message = failure_budget_message(summary, settings.max_failure_fraction, stage, resource)
    if message is not None:
        raise dg.Failure(description=message, metadata={**summary.as_metadata(), **metadata})
    return metadata


def _arrow_values(array: pa.Array) -> list[Any]:
    """The values of an Arrow array, numeric lists as numpy arrays and structs as dicts (recursively)."""
    kind = array.type
    if pa.types.is_struct(kind):
        fields = [kind.field(index).name for index in range(kind.num_fields)]
        columns = [_arrow_values(array.field(name)) for name in fields]
        valid = array.is_valid().to_pylist()
        return [
            dict(zip(fields, values, strict=True)) if is_valid else None
            for is_valid, values in zip(valid, zip(*columns, strict=True), strict=True)
        ]
    if not (pa.types.is_list(kind) or pa.types.is_large_list(kind)):
        return array.to_pylist()
    offsets = array.offsets.to_numpy()
    inner = array.values
    if pa.types.is_integer(inner.type) or pa.types.is_floating(inner.type):
        flat = inner.to_numpy(zero_copy_only=False)
        items: list[Any] = [flat[start:end] for start, end in zip(offsets[:-1], offsets[1:], strict=True)]
    else:
        values = _arrow_values(inner)
        items = [values[start:end] for start, end in zip(offsets[:-1], offsets[1:], strict=True)]
    return [
        item if is_valid else None for item, is_valid in zip(items, array.is_valid().to_pylist(), strict=True)
    ]


def row_with_arrays(frame: pl.DataFrame, index: int = 0) -> dict[str, Any]:
    """Row ``index`` of ``frame`` as a dict like ``frame.row(index, named=True)``, but every list of numbers
    is a numpy array of the column's type instead of a Python list (structs stay dicts, other lists lists).

    The same values, without making a Python float of each number: a scan's ``scene_geometry`` row (its
    cloud and every object's points and normals) converts in about a millisecond instead of 30 ms.

    >>> row = row_with_arrays(pl.DataFrame({"a": ["x"], "p": [[1.5, 2.0]], "o": [[{"q": [3], "n": "m"}]]}))
    >>> row["a"], row["p"].tolist(), row["o"][0]["q"].tolist(), row["o"][0]["n"]
    ('x', [1.5, 2.0], [3], 'm')
    """
    single = frame.slice(index, 1).rechunk()
    return {name: _arrow_values(single[name].to_arrow())[0] for name in single.columns}
