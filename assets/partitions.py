"""Every partitions definition of the graph, and the concurrency pools, in one place.

- ``scenes_partitions``: one dynamic partition per RGB-D scan (``raw_scan_files``, ``rgbd_frames``,
  ``rgbd_scenes``, ``scene_geometry``, ``frame_visibility``, ``dge_tasks``). New scans are added by the raw-files sensor and by
  ``spatial-build``; adding a scan never invalidates the partitions of the others.
- ``grounding_shard_partitions``: the static Grounding DINO shards of ``pseudo_gt_boxes``.
- ``stvqa_shard_partitions``: the static hash shards of STVQA generation and pass@2.
"""

from __future__ import annotations

import dagster as dg

from assets.grounding.shards import SHARD_KEYS
from assets.stvqa.shards import STVQA_SHARD_KEYS

SCENES_PARTITIONS_NAME = "scenes"
scenes_partitions = dg.DynamicPartitionsDefinition(name=SCENES_PARTITIONS_NAME)
grounding_shard_partitions = dg.StaticPartitionsDefinition(SHARD_KEYS)
stvqa_shard_partitions = dg.StaticPartitionsDefinition(STVQA_SHARD_KEYS)


LLM_POOL = "llm"
"""Concurrency pool of the steps that call a model API (size it by the provider's rate limit:
``dagster instance concurrency set llm N``)."""
DETECTOR_POOL = "detector"
"""Concurrency pool of the steps that run the detector (one slot per GPU)."""
