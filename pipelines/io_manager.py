"""The IO manager that stores asset outputs as Parquet under the storage root.

The layout, the default root and the atomic writes are :mod:`data_contracts.storage`'s; this module
only adapts them to Dagster's output and input contexts. Every file it writes carries the contract
version, the asset's code version and a fingerprint of the inputs' data versions in its Parquet
key-value metadata (:mod:`pipelines.file_metadata`).

The outputs of one step are published as a set: Dagster hands them over one at a time, so each is
staged (written and fsynced privately under ``<root>/.staging/``) and, when the last output the
step is expected to produce arrives, they are all renamed into place together under the root's
commit lock (:class:`data_contracts.storage.StagedTables`). A table therefore never appears beside a
quarantine from another run, and a step that fails or is killed before its last output publishes
nothing. The expected outputs are the step's selected outputs that go through an IO manager (not
asset checks, not ``Nothing``); an output returned as ``MaterializeResult`` without a value never
reaches the IO manager, so a step mixing such an output with tables would keep its tables staged:
no asset of this project does that. A commit killed half way is completed by the next build on the
same root, and staged files of killed steps are deleted then; staged files of steps that failed in
a live process are deleted when that process exits.

A run over a range of partitions (a single-run backfill, see :mod:`assets.partition_ranges`) hands
each output over as ``{partition_key: table}``: every partition goes to its own file, and all of
them join the step's set. Such a step reads a partitioned input of its own partitioning the same
way, as ``{partition_key: table}``; every other step reads the partitions it needs as one table.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping

import dagster as dg
import polars as pl
from pydantic import Field

from data_contracts.storage import StagedTables, read_table, recover_storage, resolve_storage_root, table_path
from pipelines.file_metadata import file_key_value_metadata


def _expected_outputs(context: dg.OutputContext) -> tuple[str, set[str]] | None:
    """The staging set id and the outputs the current step hands to IO managers; None outside a step."""
    try:
        step = context.step_context
    except dg.DagsterInvariantViolationError:  # an output context built by hand, outside a run
        return None
    expected = {
        name
        for name in step.selected_output_names
        if step.step.step_output_named(name).properties.asset_check_key is None
        and not step.op_def.output_def_named(name).dagster_type.is_nothing
    }
    set_id = f"{context.run_id}.{step.step.key}.{step.previous_attempt_count}"
    return set_id, expected


def _range_run_of_many(context: dg.InputContext) -> bool:
    """Whether the consuming step runs over a range of several partitions of the input's own partitioning.

    Such a step (a single-run backfill, see :mod:`assets.partition_ranges`) gets the input as
    ``{partition_key: table}``; every other step gets one table (the partitions it needs, concatenated).
    """
    try:
        step = context.step_context
    except dg.DagsterInvariantViolationError:  # an input loaded outside a step (``load_asset_value``)
        return False
    if not step.has_partition_key_range:
        return False
    key_range = step.partition_key_range
    return key_range.start != key_range.end and context.asset_partitions_def == step.job_def.partitions_def


class ParquetIOManager(dg.ConfigurableIOManager):
    """Stores `polars.DataFrame` outputs as Parquet under `root` and loads them back.

    Outputs that are `None` (assets that write files themselves and return `MaterializeResult`)
    write nothing here but still count as delivered. The outputs of one step become visible together
    (see the module docstring).
    """

    root: str | None = Field(
        default=None,
        description="Storage root for the Parquet caches; default $SPATIAL_DATA_ROOT, "
        "$DAGSTER_HOME/spatial_data or ./data.",
    )

    def _asset_name(self, context: dg.OutputContext | dg.InputContext) -> str:
        return "__".join(context.asset_key.path)

    def handle_output(
        self, context: dg.OutputContext, obj: pl.DataFrame | Mapping[str, pl.DataFrame] | None
    ) -> None:
        if isinstance(obj, Mapping):
            self._handle_partitions(context, obj)
            return
        if obj is not None and not isinstance(obj, pl.DataFrame):
            raise TypeError(
                f"asset {self._asset_name(context)} returned {type(obj).__name__}, expected polars.DataFrame"
            )
        root = resolve_storage_root(self.root)
        path = None
        if obj is not None:
            partition = context.partition_key if context.has_asset_partitions else None
            path = table_path(root, self._asset_name(context), partition)
        staged = self._staged(context, root)
        staged.add(context.name, obj, path, file_key_value_metadata(context) if obj is not None else None)
        self._commit_when_complete(context, staged)
        if path is not None:
            context.add_output_metadata(
                {"path": dg.MetadataValue.path(str(path)), "dagster/row_count": obj.height}
            )

    def _staged(self, context: dg.OutputContext, root) -> StagedTables:
        step = _expected_outputs(context)
        set_id = step[0] if step is not None else f"direct.{uuid.uuid4().hex}"
        return StagedTables(root, set_id)

    def _commit_when_complete(self, context: dg.OutputContext, staged: StagedTables) -> None:
        step = _expected_outputs(context)
        expected = step[1] if step is not None else {context.name}
        if staged.names() >= expected:
            staged.commit()

    def _handle_partitions(self, context: dg.OutputContext, tables: Mapping[str, pl.DataFrame]) -> None:
        """A range run's output: ``{partition_key: table}``, one file per partition, staged with the step's set."""
        name = self._asset_name(context)
        expected = set(context.asset_partition_keys) if context.has_asset_partitions else set()
        if not expected or set(tables) != expected:
            raise ValueError(
                f"asset {name} returned tables for partitions {sorted(tables)}, but the run materialises "
                f"{sorted(expected) or 'no partitions'}"
            )
        for partition, frame in tables.items():
            if not isinstance(frame, pl.DataFrame):
                raise TypeError(
                    f"asset {name} returned {type(frame).__name__} for partition {partition}, "
                    "expected polars.DataFrame"
                )
        root = resolve_storage_root(self.root)
        staged = self._staged(context, root)
        key_value_metadata = file_key_value_metadata(context)
        for partition in sorted(tables):
            staged.add(
                f"{context.name}.{partition}",
                tables[partition],
                table_path(root, name, partition),
                key_value_metadata,
            )
        staged.add(context.name, None, None)  # the output is delivered: all its partitions are staged
        self._commit_when_complete(context, staged)
        folder = table_path(root, name, sorted(tables)[0]).parent
        context.add_output_metadata({"path": dg.MetadataValue.path(str(folder))})

    def load_input(self, context: dg.InputContext) -> pl.DataFrame | dict[str, pl.DataFrame]:
        name = self._asset_name(context)
        root = resolve_storage_root(self.root)
        recover_storage(root)  # complete a set whose commit a killed build left half done
        if context.has_asset_partitions:
            keys = list(context.asset_partition_keys)
            if _range_run_of_many(context) and len(keys) > 1:
                return {key: read_table(root, name, [key]) for key in keys}
            return read_table(root, name, keys)
        return read_table(root, name)
