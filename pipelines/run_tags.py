"""Dagster's reserved run tags that this project reads or writes, named once.

Dagster sets these tags on the runs it launches (a partitioned run, a single-run backfill over a range,
``dagster asset materialize --partition-range``) and reads them to know which partitions a run covers. The
``dagster`` package does not export their names (only its private ``dagster._core.storage.tags`` spells them),
so they are spelled here, and ``tests/pipelines/test_run_tags.py`` checks them against what Dagster writes on a
real run.

>>> PARTITION_RANGE_START_TAG
'dagster/asset_partition_range_start'
"""

from __future__ import annotations

__all__ = ["PARTITION_RANGE_END_TAG", "PARTITION_RANGE_START_TAG", "PARTITION_TAG"]

PARTITION_TAG = "dagster/partition"
"""The partition key of a run over one partition."""
PARTITION_RANGE_START_TAG = "dagster/asset_partition_range_start"
"""The first partition key of a run over a range of partitions."""
PARTITION_RANGE_END_TAG = "dagster/asset_partition_range_end"
"""The last partition key of a run over a range of partitions."""
