"""A storage root on the Hugging Face Hub: ``hf://datasets/OWNER/NAME[@REVISION]`` as ``--data_root``.

A repo that ``spatial-publish`` wrote holds one folder per table (``<table>/<split>-0000i-of-0000n.parquet``),
which is what a partitioned table looks like under a local storage root. :func:`resolve_data_root` fetches
the folders of the tables asked for through the same Hub reader as every other input
(:func:`readers.common.resolve_location`: the Hub cache, offline with ``HF_HUB_OFFLINE=1`` once fetched) and
returns the snapshot folder, which the trainer and the evaluator then read as a local root. A table whose
files were published under a contract of another major version than this code's is refused with one
sentence (:class:`IncompatibleContractError`).

>>> resolve_data_root("data", ["stvqa"])
PosixPath('data')
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Iterable
from pathlib import Path

from data_contracts.parquet_files import read_file_metadata
from readers.common import HubLocation, parse_hub_location, resolve_location

logger = logging.getLogger(__name__)


class IncompatibleContractError(ValueError):
    """A published table built under a contract this code cannot read."""


def local_contract_version(table: str) -> str | None:
    """``CONTRACT_VERSION`` of ``data_contracts.<table>`` (None for a table without its own contract module).

    >>> local_contract_version("stvqa") is not None, local_contract_version("no_such_table")
    (True, None)
    """
    try:
        module = importlib.import_module(f"data_contracts.{table}")
    except ModuleNotFoundError:
        return None
    return getattr(module, "CONTRACT_VERSION", None)


def check_contract(table: str, folder: Path, location: str) -> None:
    """Raise :class:`IncompatibleContractError` when a file of ``folder`` has another major contract version."""
    local = local_contract_version(table)
    if local is None:
        return
    for path in sorted(folder.glob("*.parquet")):
        published = read_file_metadata(path).get("contract_version")
        if published and published.split(".")[0] != local.split(".")[0]:
            raise IncompatibleContractError(
                f"table {table!r} of {location} was published under contract {published}, which this code "
                f"(contract {local}) cannot read: use a revision published with a {local.split('.')[0]}.x "
                "contract, or a matching version of this code."
            )


def resolve_data_root(data_root: str | Path, tables: Iterable[str]) -> Path:
    """A local folder to read ``tables`` from: ``data_root`` itself, or the Hub snapshot holding their folders.

    Raises:
        `MissingInputError`: a table's folder cannot be fetched or found in the Hub cache.
        `IncompatibleContractError`: a table was published under an incompatible contract.
    """
    hub = parse_hub_location(data_root)
    if hub is None:
        return Path(data_root)
    snapshot: Path | None = None
    for table in dict.fromkeys(tables):
        path_in_repo = f"{hub.path_in_repo}/{table}" if hub.path_in_repo else table
        location = str(HubLocation(hub.repo_id, hub.revision, path_in_repo))
        folder = resolve_location(location, "data_root")
        check_contract(table, folder, str(hub))
        snapshot = folder.parent
    return snapshot if snapshot is not None else resolve_location(str(hub), "data_root")
