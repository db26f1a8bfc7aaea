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
"""

from __future__ import annotations

import uuid

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

    def handle_output(self, context: dg.OutputContext, obj: pl.DataFrame | None) -> None:
        if obj is not None and not isinstance(obj, pl.DataFrame):
            raise TypeError(
                f"asset {self._asset_name(context)} returned {type(obj).__name__}, expected polars.DataFrame"
            )
        root = resolve_storage_root(self.root)
        path = None
        if obj is not None:
            partition = context.partition_key if context.has_asset_partitions else None
            path = table_path(root, self._asset_name(context), partition)
        step = _expected_outputs(context)
        set_id, expected = step if step is not None else (f"direct.{uuid.uuid4().hex}", {context.name})
        staged = StagedTables(root, set_id)
        staged.add(context.name, obj, path, file_key_value_metadata(context) if obj is not None else None)
        if staged.names() >= expected:
            staged.commit()
        if path is not None:
            context.add_output_metadata(
                {"path": dg.MetadataValue.path(str(path)), "dagster/row_count": obj.height}
            )

    def load_input(self, context: dg.InputContext) -> pl.DataFrame:
        name = self._asset_name(context)
        root = resolve_storage_root(self.root)
        recover_storage(root)  # complete a set whose commit a killed build left half done
        if context.has_asset_partitions:
            return read_table(root, name, list(context.asset_partition_keys))
        return read_table(root, name)
