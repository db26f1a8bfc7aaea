"""The IO manager that stores asset outputs as Parquet under the storage root.

The layout, the default root and the atomic writes are :mod:`data_contracts.storage`'s; what each file
records of where it comes from is :mod:`assets.provenance`'s. This module only adapts them to Dagster's
output and input contexts, through their documented properties.

An output is either the rows (a ``polars.DataFrame``), which this IO manager writes, or a
:class:`~data_contracts.storage.WrittenTable`: the file was already written whole by the step itself (a
worker writing its partition, an asset streaming a large table, see :func:`assets.provenance.write_outputs`),
and nothing is written here. Every output is its own atomic file (a reader sees the previous file or the new
one, never half of one), so a step killed between its table and its quarantine leaves the new table beside
the previous quarantine until the step runs again.

Partitioned outputs arrive as ``{partition_key: table}`` for the partitions of the run, whatever its shape
(one partition, or a range from a single-run backfill; see :mod:`assets.partition_ranges`), and every
partition goes to its own file. A partitioned input annotated :data:`~assets.partition_ranges.PartitionTables`
(a ``dict``) is loaded as ``{partition_key: table}``, one annotated
:data:`~assets.partition_ranges.PartitionFiles` as ``{partition_key: path}`` (nothing read: the worker that
computes the partition reads its file); with any other annotation the partitions the step reads come as one
table. An unpartitioned input annotated :data:`~assets.partition_ranges.TableFile` is the table's path (the step
reads what it needs of it).
"""

from __future__ import annotations

import typing
from collections.abc import Mapping
from pathlib import Path

import dagster as dg
import polars as pl
from pydantic import Field, PrivateAttr

from assets.partition_ranges import PartitionFiles, TableFile
from assets.provenance import plan_for
from data_contracts.storage import WrittenTable, read_table, resolve_storage_root, table_path, write_table
from pipelines.run_triggers import tag_automation_run

TableValue = pl.DataFrame | WrittenTable


def _table_name(context: dg.OutputContext | dg.InputContext) -> str:
    return "__".join(context.asset_key.path)


def _contract_version(context: dg.OutputContext) -> str | None:
    value = context.output_metadata.get("contract_version") or context.definition_metadata.get(
        "contract_version"
    )
    raw = value.value if isinstance(value, dg.MetadataValue) else value
    return None if raw is None else str(raw)


class ParquetIOManager(dg.ConfigurableIOManager):
    """Stores `polars.DataFrame` outputs as Parquet under `root` and loads them back.

    Outputs that are `None` (assets that write files themselves and return `MaterializeResult`) write
    nothing here, nor do outputs that are already-written files (`WrittenTable`).
    """

    root: str | None = Field(
        default=None,
        description="Storage root for the Parquet caches; default $SPATIAL_DATA_ROOT, "
        "$DAGSTER_HOME/spatial_data or ./data.",
    )

    _instance: dg.DagsterInstance | None = PrivateAttr(default=None)

    def setup_for_execution(self, context: dg.InitResourceContext) -> None:
        self._instance = context.instance  # where the raw files' observations are recorded
        if context.instance is not None:
            tag_automation_run(context.instance, context.run, resolve_storage_root(self.root))

    def handle_output(
        self, context: dg.OutputContext, obj: TableValue | Mapping[str, TableValue] | None
    ) -> None:
        if obj is None:
            return
        name = _table_name(context)
        root = resolve_storage_root(self.root)
        values = self._tables_by_file(context, name, obj)
        frames = {partition: value for partition, value in values.items() if isinstance(value, pl.DataFrame)}
        if frames:
            self._write(context, root, frames)
        for partition, value in values.items():
            if isinstance(value, WrittenTable) and Path(value.path) != table_path(root, name, partition):
                raise ValueError(
                    f"asset {name} wrote {value.path}, not its file {table_path(root, name, partition)}"
                )
        if context.has_asset_partitions:  # the folder of the partition files
            context.add_output_metadata(
                {"path": dg.MetadataValue.path(str(table_path(root, name, "_").parent))}
            )
        else:
            value = values[None]
            rows = value.height if isinstance(value, pl.DataFrame) else value.rows
            context.add_output_metadata(
                {"path": dg.MetadataValue.path(str(table_path(root, name))), "dagster/row_count": rows}
            )

    def _write(
        self, context: dg.OutputContext, root: Path, frames: Mapping[str | None, pl.DataFrame]
    ) -> None:
        """Write ``frames`` (by partition) with their provenance; with no instance or asset (an output context
        built by hand) only the contract version is recorded."""
        contract_version = _contract_version(context)
        if not context.has_asset_key or self._instance is None:
            metadata = {} if contract_version is None else {"contract_version": contract_version}
            for partition, frame in frames.items():
                write_table(frame, table_path(root, _table_name(context), partition), metadata)
            return
        spec = context.asset_spec
        deps = [dep.asset_key for dep in spec.deps]
        plan = plan_for(self._instance, root, context.asset_key, spec.code_version, deps, frames)
        for partition, frame in frames.items():
            plan.write(frame, partition, contract_version)

    @staticmethod
    def _tables_by_file(
        context: dg.OutputContext, name: str, obj: TableValue | Mapping[str, TableValue]
    ) -> dict[str | None, TableValue]:
        """``{partition key or None: table}``, checked against the partitions the run materialises."""
        if not context.has_asset_partitions:
            if not isinstance(obj, TableValue):
                raise TypeError(f"asset {name} returned {type(obj).__name__}, expected polars.DataFrame")
            return {None: obj}
        expected = set(context.asset_partition_keys)
        if not isinstance(obj, Mapping) or set(obj) != expected:
            given = sorted(obj) if isinstance(obj, Mapping) else type(obj).__name__
            raise TypeError(
                f"partitioned asset {name} must return {{partition_key: polars.DataFrame}} for the run's "
                f"partitions {sorted(expected)}; got {given} (see assets.partition_ranges.run_partitions)"
            )
        for partition, frame in obj.items():
            if not isinstance(frame, TableValue):
                raise TypeError(
                    f"asset {name} returned {type(frame).__name__} for partition {partition}, "
                    "expected polars.DataFrame"
                )
        return {partition: obj[partition] for partition in sorted(obj)}

    def load_input(
        self, context: dg.InputContext
    ) -> pl.DataFrame | dict[str, pl.DataFrame] | dict[str, Path] | Path:
        name = _table_name(context)
        root = resolve_storage_root(self.root)
        if not context.has_asset_partitions:
            if context.dagster_type.typing_type is TableFile:
                return table_path(root, name)
            return read_table(root, name)
        keys = list(context.asset_partition_keys)
        annotation = context.dagster_type.typing_type
        if typing.get_origin(annotation) in (dict, Mapping):
            if typing.get_args(annotation) == typing.get_args(PartitionFiles):
                return {key: table_path(root, name, key) for key in keys}
            return {key: read_table(root, name, [key]) for key in keys}
        return read_table(root, name, keys)
