"""Shards of the pseudo-GT work: a stable assignment of questions to a fixed set of partitions.

Grounding DINO is the expensive step, so ``pseudo_gt_boxes`` is a statically partitioned asset: each
shard can run on its own GPU machine, and a new or changed question only re-runs its own shard. The
assignment hashes the question id, so it never depends on the order or the number of rows.

>>> SHARD_KEYS[:2], len(SHARD_KEYS)
(['shard-00', 'shard-01'], 8)
>>> shard_of("omnispatial/12_0") in SHARD_KEYS
True
"""

from __future__ import annotations

from data_contracts.stable_hash import stable_bucket

NUM_SHARDS = 8
SHARD_KEYS = [f"shard-{index:02d}" for index in range(NUM_SHARDS)]


def shard_of(question_id: str, num_shards: int = NUM_SHARDS) -> str:
    """The shard key of a question (SHA-256 of its id, modulo the number of shards)."""
    return f"shard-{stable_bucket(question_id, num_shards):02d}"
