"""What the IO manager writes into each Parquet file's key-value metadata, from the step that made it.

Each table file the asset graph writes says, in its own footer (so a copy of the file still says it,
with no Dagster instance at hand; read it with :func:`data_contracts.storage.read_table_metadata`):

- ``contract_version``: the version of the table's contract, as ``finalize_table`` (or the
  quarantine output) put it in the output's metadata;
- ``code_version``: the code version of the asset that wrote it (its ``AssetOut``);
- ``input_data_versions``: JSON ``{upstream asset: data version}`` of every upstream asset of the
  output (raw-file sources included) as Dagster recorded them for this step. A partitioned upstream's
  version is Dagster's hash over the partitions the step read;
- ``source_fingerprint``: the first 16 hex digits of the SHA-256 of that JSON.

The fingerprint is built from Dagster's data versions, not from paths: the raw-file sources are
versioned by file content and paths relative to their configured root (:mod:`assets.raw_files`), the
sample world by its configuration, and every other asset by its code version and its inputs'
versions, so moving or copying the data folder leaves it unchanged, and changing one raw file
changes it for exactly the files downstream of that file's source.

Dagster's output context has no public property for the step's code version and input data versions,
so this module reads them from ``context.step_context``: the one place the project uses Dagster's
execution internals, pinned by ``tests/pipelines/test_file_metadata.py``. The IO manager itself reads
only the output and input contexts' documented properties.
"""

from __future__ import annotations

import hashlib
import json
import logging

import dagster as dg

logger = logging.getLogger(__name__)


def _text(value: object) -> str | None:
    raw = value.value if isinstance(value, dg.MetadataValue) else value
    return None if raw is None else str(raw)


def fingerprint(versions: dict[str, str | None]) -> str:
    """The source fingerprint of ``{upstream asset: data version}``: 16 hex digits of a SHA-256.

    >>> fingerprint({"b": "2", "a": "1"}) == fingerprint({"a": "1", "b": "2"})
    True
    >>> len(fingerprint({}))
    16
    """
    return hashlib.sha256(json.dumps(versions, sort_keys=True).encode()).hexdigest()[:16]


def input_data_versions(context: dg.OutputContext) -> dict[str, str | None] | None:
    """``{upstream asset: data version}`` of the output's asset in this step; None outside a step."""
    try:
        step = context.step_context
    except dg.DagsterInvariantViolationError:  # an output context built by hand, outside a run
        return None
    assets_def = step.assets_def
    if assets_def is None or not context.has_asset_key:
        return None
    versions: dict[str, str | None] = {}
    for upstream in sorted(assets_def.asset_deps.get(context.asset_key, set()), key=lambda k: k.to_string()):
        info = step.maybe_fetch_and_get_input_asset_version_info(upstream)
        version = info.data_version if info is not None else None
        versions[upstream.to_user_string()] = version.value if version is not None else None
    return versions


def file_key_value_metadata(context: dg.OutputContext) -> dict[str, str]:
    """The key-value metadata for the file(s) of the output ``context`` describes (see the module docstring).

    Entries that cannot be known (an output context built by hand, an output without a contract
    version in its metadata) are left out.
    """
    metadata: dict[str, str] = {}
    contract_version = _text(context.output_metadata.get("contract_version"))
    if contract_version is None:
        contract_version = _text(context.definition_metadata.get("contract_version"))
    if contract_version is not None:
        metadata["contract_version"] = contract_version
    try:
        assets_def = context.step_context.assets_def
    except dg.DagsterInvariantViolationError:
        assets_def = None
    if assets_def is not None and context.has_asset_key:
        code_version = assets_def.code_versions_by_key.get(context.asset_key)
        if code_version is not None:
            metadata["code_version"] = code_version
    versions = input_data_versions(context)
    if versions is not None:
        metadata["input_data_versions"] = json.dumps(versions, sort_keys=True)
        metadata["source_fingerprint"] = fingerprint(versions)
    return metadata
