"""The IO manager that stores asset outputs as Parquet under the storage root.

The layout, the default root and the atomic writes are :mod:`data_contracts.storage`'s; this module
only adapts them to Dagster's output and input contexts, through their documented properties. Every
output is written as its own atomic file (a reader sees the previous file or the new one, never half
of one), so a step killed between its table and its quarantine leaves the new table beside the
previous quarantine until the step runs again. Every file carries the contract version, the asset's
code version, its inputs' content versions and its own in its Parquet key-value metadata
(:mod:`pipelines.file_metadata`), computed for each partition's file from what that partition read.

Partitioned outputs arrive as ``{partition_key: table}`` for the partitions of the run, whatever its
shape (one partition, or a range from a single-run backfill; see :mod:`assets.partition_ranges`), and
every partition goes to its own file. A partitioned input annotated
:data:`~assets.partition_ranges.PartitionTables` (a ``dict``) is loaded as ``{partition_key: table}``;
with any other annotation the partitions the step reads come as one table.
"""

from __future__ import annotations

import typing
from collections.abc import Mapping

import dagster as dg
import polars as pl
from pydantic import Field, PrivateAttr

from data_contracts.storage import read_table, resolve_storage_root, table_path, write_table
from pipelines.file_metadata import file_key_value_metadata
from pipelines.run_triggers import tag_automation_run


def _table_name(context: dg.OutputContext | dg.InputContext) -> str:
    return "__".join(context.asset_key.path)


class ParquetIOManager(dg.ConfigurableIOManager):
    """Stores `polars.DataFrame` outputs as Parquet under `root` and loads them back.

    Outputs that are `None` (assets that write files themselves and return `MaterializeResult`) write
    nothing here.
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
        self, context: dg.OutputContext, obj: pl.DataFrame | Mapping[str, pl.DataFrame] | None
    ) -> None:
        if obj is None:
            return
        name = _table_name(context)
        root = resolve_storage_root(self.root)
        tables = self._tables_by_file(context, name, obj)
        for partition, frame in tables.items():
            key_value_metadata = file_key_value_metadata(context, self._instance, root, partition)
            write_table(frame, table_path(root, name, partition), key_value_metadata)
        if context.has_asset_partitions:  # the folder of the partition files
            context.add_output_metadata(
                {"path": dg.MetadataValue.path(str(table_path(root, name, "_").parent))}
            )
        else:
            context.add_output_metadata(
                {"path": dg.MetadataValue.path(str(table_path(root, name))), "dagster/row_count": obj.height}
            )

    @staticmethod
    def _tables_by_file(
        context: dg.OutputContext, name: str, obj: pl.DataFrame | Mapping[str, pl.DataFrame]
    ) -> dict[str | None, pl.DataFrame]:
        """``{partition key or None: table}``, checked against the partitions the run materialises."""
        if not context.has_asset_partitions:
            if not isinstance(obj, pl.DataFrame):
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
            if not isinstance(frame, pl.DataFrame):
                raise TypeError(
                    f"asset {name} returned {type(frame).__name__} for partition {partition}, "
                    "expected polars.DataFrame"
                )
        return {partition: obj[partition] for partition in sorted(obj)}

    def load_input(self, context: dg.InputContext) -> pl.DataFrame | dict[str, pl.DataFrame]:
        name = _table_name(context)
        root = resolve_storage_root(self.root)
        if not context.has_asset_partitions:
            return read_table(root, name)
        keys = list(context.asset_partition_keys)
        if typing.get_origin(context.dagster_type.typing_type) in (dict, Mapping):
            return {key: read_table(root, name, [key]) for key in keys}
        return read_table(root, name, keys)
