"""One automation tick evaluated with the partition reads the daemon makes, for tests.

``dagster.evaluate_automation_conditions`` (Dagster's entry point for evaluating automation conditions in tests)
serializes the new cursor with the bare instance as its dynamic-partitions store: each dynamic-partitions
subset it compresses reads the partition keys from storage again, on SQLite with a new connection each time.
On the sample world that is 8-15 CPU-s of a tick whose evaluation costs about 1. The daemon serializes the
cursor in its evaluation's partition-loading context, whose caching queryer reads each partitions set once per
tick; :func:`evaluate_tick` reads them once per tick too. Nothing adds partitions during a tick, so what is
evaluated is the same.
"""

from __future__ import annotations

import datetime
import functools

import dagster as dg
import pytest


def evaluate_tick(
    defs: dg.Definitions,
    instance: dg.DagsterInstance,
    cursor=None,
    evaluation_time: datetime.datetime | None = None,
):
    """``dg.evaluate_automation_conditions`` with each dynamic partitions set read from storage once."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(instance, "get_dynamic_partitions", functools.cache(instance.get_dynamic_partitions))
        return dg.evaluate_automation_conditions(
            defs=defs, instance=instance, cursor=cursor, evaluation_time=evaluation_time
        )
