"""The instance's run coordinator: Dagster's queue, with the automation's trigger tags set when a run is created.

``pipelines/deploy/dagster.yaml`` (and ``dagster-postgres.yaml``) name :class:`TaggingRunCoordinator`
instead of Dagster's ``QueuedRunCoordinator``; it behaves the same (same config: ``max_concurrent_runs``,
``tag_concurrency_limits`` under ``concurrency``), except that a run the automation sensor submits is given
its ``spatial/trigger`` and ``spatial/changed_files`` tags (:mod:`pipelines.run_triggers`) before it
waits in the queue, so a queued run already says why it exists.

The tables are read under the run's configured storage root (``resources.io_manager.config.root`` of its
run config), else the default root of this process's environment (``$SPATIAL_DATA_ROOT``,
``$DAGSTER_HOME/spatial_data``): the daemon that submits the automation's runs shares ``dagster dev``'s.
"""

from __future__ import annotations

import json
import logging
import sqlite3
from collections.abc import Mapping
from typing import Any

import dagster as dg

from data_contracts.storage import resolve_storage_root
from pipelines.run_triggers import tag_automation_run

logger = logging.getLogger(__name__)


class TaggingRunCoordinator(dg.QueuedRunCoordinator):
    """Dagster's queued run coordinator that tags the automation's runs when they are submitted."""

    def submit_run(self, context: dg.SubmitRunContext) -> dg.DagsterRun:
        run = context.dagster_run
        run_config: Mapping[str, Any] = run.run_config  # the run's config: nested JSON-like mappings
        root = run_config.get("resources", {}).get("io_manager", {}).get("config", {}).get("root")
        try:
            tag_automation_run(context.workspace.instance, run, resolve_storage_root(root))
        except (OSError, ValueError, sqlite3.Error, json.JSONDecodeError) as error:  # the run starts untagged
            logger.warning(
                "run %s: its trigger tags could not be read (%s); the run tags itself when it starts",
                run.run_id,
                error,
            )
        return super().submit_run(context)
