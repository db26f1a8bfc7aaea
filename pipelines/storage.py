"""Where the Parquet caches live, and the IO manager that writes and reads them.

Layout under the storage root: ``<root>/<asset>.parquet`` for an unpartitioned asset and
``<root>/<asset>/<partition>.parquet`` for a partitioned one. Files are written atomically (a
temporary file renamed into place), with ``datasets`` feature metadata so that every cache also
loads with ``datasets.load_dataset("parquet", data_files=...)`` and images decode as images.

The root is ``$SPATIAL_DATA_ROOT`` when set, else ``$DAGSTER_HOME/spatial_data`` when
``DAGSTER_HOME`` is set, else ``./data``.
"""

from __future__ import annotations

import os
from pathlib import Path

import dagster as dg
import polars as pl
import pyarrow.parquet as pq
from pydantic import Field

from data_contracts.images import to_huggingface_arrow

STORAGE_ROOT_ENV = "SPATIAL_DATA_ROOT"


def default_storage_root() -> str:
    """The storage root used when none is configured (see the module docstring)."""
    if os.environ.get(STORAGE_ROOT_ENV):
        return os.environ[STORAGE_ROOT_ENV]
    if os.environ.get("DAGSTER_HOME"):
        return str(Path(os.environ["DAGSTER_HOME"]) / "spatial_data")
    return str(Path("data").resolve())


def table_path(root: str | Path, asset_name: str, partition: str | None = None) -> Path:
    """Path of an asset's Parquet file (one file per partition for partitioned assets)."""
    base = Path(root)
    if partition is None:
        return base / f"{asset_name}.parquet"
    return base / asset_name / f"{_safe_partition_name(partition)}.parquet"


def _safe_partition_name(partition: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_.=" else "_" for ch in partition)


def write_table(frame: pl.DataFrame, path: Path) -> None:
    """Write ``frame`` to ``path`` atomically, with Hugging Face image feature metadata."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    pq.write_table(to_huggingface_arrow(frame), tmp, compression="zstd")
    os.replace(tmp, path)


def read_table(root: str | Path, asset_name: str, partitions: list[str] | None = None) -> pl.DataFrame:
    """Read an asset's cache; for a partitioned asset, the given partitions (all when None), concatenated."""
    single = table_path(root, asset_name)
    if single.exists() and partitions is None:
        return pl.read_parquet(single)
    folder = Path(root) / asset_name
    if partitions is None:
        files = sorted(folder.glob("*.parquet")) if folder.is_dir() else []
    else:
        files = [table_path(root, asset_name, key) for key in partitions]
    missing = [str(path) for path in files if not path.exists()]
    if missing or not files:
        raise FileNotFoundError(
            f"no Parquet cache for asset {asset_name!r} under {root} (missing: {missing or [str(single)]}); "
            "materialise the asset first"
        )
    return pl.concat([pl.read_parquet(path) for path in files], how="diagonal_relaxed")


class ParquetIOManager(dg.ConfigurableIOManager):
    """Stores ``polars.DataFrame`` outputs as Parquet under ``root`` and loads them back.

    Outputs that are ``None`` (assets that write files themselves and return ``MaterializeResult``)
    are not handled here.
    """

    root: str | None = Field(
        default=None, description="Storage root for the Parquet caches; default: see pipelines.storage."
    )

    @property
    def resolved_root(self) -> str:
        """The configured root, or the default storage root."""
        return self.root or default_storage_root()

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
        path = table_path(self.resolved_root, self._asset_name(context), partition)
        write_table(obj, path)
        context.add_output_metadata(
            {"path": dg.MetadataValue.path(str(path)), "dagster/row_count": obj.height}
        )

    def load_input(self, context: dg.InputContext) -> pl.DataFrame:
        name = self._asset_name(context)
        if context.has_asset_partitions:
            return read_table(self.resolved_root, name, list(context.asset_partition_keys))
        return read_table(self.resolved_root, name)
