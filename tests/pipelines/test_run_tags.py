"""The reserved run tags that ``pipelines.run_tags`` names once are the ones Dagster writes and reads.

A real run over one partition carries :data:`PARTITION_TAG`; a run tagged with the two range tags covers that
range (what Dagster gives the asset). The names are also compared with Dagster's own, which only its private
``dagster._core.storage.tags`` exports: an upgrade that renames them fails here, not silently in the project.
"""

from __future__ import annotations

import dagster as dg

from pipelines.run_tags import PARTITION_RANGE_END_TAG, PARTITION_RANGE_START_TAG, PARTITION_TAG

partitions = dg.StaticPartitionsDefinition(["a", "b", "c"])


def test_a_run_over_one_partition_carries_the_partition_tag():
    @dg.asset(partitions_def=partitions)
    def one_partition() -> None:
        pass

    with dg.instance_for_test() as instance:
        result = dg.materialize([one_partition], instance=instance, partition_key="b")
        assert result.success
        assert instance.get_run_by_id(result.run_id).tags[PARTITION_TAG] == "b"


def test_the_range_tags_give_the_asset_its_range():
    seen = []

    @dg.asset(partitions_def=partitions, backfill_policy=dg.BackfillPolicy.single_run())
    def keys_seen(context) -> None:
        seen.append(list(context.partition_keys))

    tags = {PARTITION_RANGE_START_TAG: "a", PARTITION_RANGE_END_TAG: "b"}
    with dg.instance_for_test() as instance:
        assert dg.materialize([keys_seen], instance=instance, tags=tags).success
    assert seen == [["a", "b"]]


def test_the_names_are_dagsters():
    from dagster._core.storage import tags  # private: read here only, to catch a rename on an upgrade

    assert (PARTITION_TAG, PARTITION_RANGE_START_TAG, PARTITION_RANGE_END_TAG) == (
        tags.PARTITION_NAME_TAG,
        tags.ASSET_PARTITION_RANGE_START_TAG,
        tags.ASSET_PARTITION_RANGE_END_TAG,
    )
