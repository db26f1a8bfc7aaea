"""The IO manager that stores asset outputs as Parquet under the storage root.

The layout, the default root and the atomic writes are :mod:`data_contracts.storage`'s; this module
only adapts them to Dagster's output and input contexts.
"""

from __future__ import annotations

import dagster as dg
import polars as pl
from pydantic import Field

from data_contracts.storage import read_table, resolve_storage_root, table_path, write_table


class ParquetIOManager(dg.ConfigurableIOManager):
    """Stores ``polars.DataFrame`` outputs as Parquet under ``root`` and loads them back.

    Outputs that are ``None`` (assets that write files themselves and return ``MaterializeResult``)
    are not handled here.
    """

    root: str | None = Field(
        default=None,
        description="Storage root for the Parquet caches; default $SPATIAL_DATA_ROOT, "
        "$DAGSTER_HOME/spatial_data or ./data.",
    )

    def _asset_name(self, context: dg.OutputContext | dg.InputContext) -> str:
        return "__".join(context.asset_key.path)

    def handle_output(self, context: dg.OutputContext, obj: pl.DataFrame | None) -> None:
        if obj is None:
            return
        if not isinstance(obj, pl.DataFrame):
            raise TypeError(
                f"asset {self._asset_name(context)} returned {type(obj).__name__}, expected polars.DataFrame"
            )
        partition = context.partition_key if context.has_asset_partitions else None
        path = table_path(resolve_storage_root(self.root), self._asset_name(context), partition)
        write_table(obj, path)
        context.add_output_metadata(
            {"path": dg.MetadataValue.path(str(path)), "dagster/row_count": obj.height}
        )

    def load_input(self, context: dg.InputContext) -> pl.DataFrame:
        name = self._asset_name(context)
        root = resolve_storage_root(self.root)
        if context.has_asset_partitions:
            return read_table(root, name, list(context.asset_partition_keys))
        return read_table(root, name)
