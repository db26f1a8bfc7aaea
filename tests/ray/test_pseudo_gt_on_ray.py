"""A ``pseudo_gt_boxes`` shard as a Ray task gives local mode's tables bit for bit, even when its worker dies.

A tiny Grounding DINO (random weights, built locally) grounds the small world's OmniSpatial questions,
copied so that images repeat, with corrupt images among them: once in the process (``compute: local``)
and once as a Ray task on a real local Ray cluster (:func:`assets.compute.partition_results`). The
Parquet bytes of the two tables must be equal. Then the task's worker is killed in the middle of the
shard; Ray runs the task again and the tables are again local mode's, the quarantine once.
"""

from __future__ import annotations

import re
from pathlib import Path

import polars as pl
import pytest

from assets.compute import ComputeSettings, partition_results
from assets.grounding.assets import pseudo_gt_boxes_shard
from assets.grounding.pseudo_gt import PseudoGtSettings
from assets.partition_ranges import restore_events
from readers.mcq import read_omnispatial
from tests.ray.conftest import first_task_killed, output_plans, parquet_bytes, written_files

pytestmark = [pytest.mark.ray, pytest.mark.slow]

PHRASE_CHOICES = [
    ["red box", "chair"],
    ["blue ball"],
    ["table", "lamp", "green plant"],
    [],
    ["red box", "chair"],
]


@pytest.fixture(scope="module")
def tiny_model(tiny_grounding_dino) -> Path:
    """The session's tiny Grounding DINO (``tests/conftest.py``), the one the grounding tests use."""
    return tiny_grounding_dino


@pytest.fixture(scope="module")
def shard(small_world) -> tuple[pl.DataFrame, pl.DataFrame]:
    """`mcq_questions` and `object_phrases` of one shard: each world question three times (same image,
    same or other phrases), three questions whose images do not decode (two share their bytes under
    different names) and an `object_phrases` row whose question is gone."""
    questions, log = read_omnispatial(small_world / "omnispatial", split="train")
    assert len(log) == 0 and questions.height >= 4
    copies = []
    for copy in range(3):
        copies.append(questions.with_columns(pl.col("question_id") + f"-copy{copy}"))
    first = questions.row(0, named=True)
    broken = []
    for name, data in [
        ("junk-a.jpg", b"not an image"),
        ("junk-b.jpg", b"not an image"),
        ("cut.jpg", first["image"]["bytes"][:120]),
    ]:
        broken.append(
            questions.head(1).with_columns(
                pl.lit(f"broken-{name}").alias("question_id"),
                pl.struct(pl.lit(data).alias("bytes"), pl.lit(name).alias("path")).alias("image"),
            )
        )
    table = pl.concat(copies + broken, how="vertical_relaxed")
    identifiers = table["question_id"].to_list()
    phrases = pl.DataFrame(
        {
            "question_id": [*identifiers, "gone-question"],
            "phrases": [
                ["chair"] if identifier.startswith("broken-") else PHRASE_CHOICES[index % len(PHRASE_CHOICES)]
                for index, identifier in enumerate(identifiers)
            ]
            + [["cup"]],
        }
    ).with_columns(
        pl.lit("spatial").alias("task_type"), pl.lit(False).alias("skipped")
    )  # as object_phrases has
    return table, phrases


def _shard_tables(shard, settings: PseudoGtSettings, compute: ComputeSettings, storage: Path) -> dict:
    """The shard's ``pseudo_gt_boxes`` and quarantine tables, built where ``compute`` says (the questions
    carry their images, so no ``mcq_images`` file is read)."""
    questions, phrases = shard
    plans = output_plans(storage, "pseudo_gt_boxes", "pseudo_gt_boxes_quarantine")
    images = storage / "mcq_images.parquet"
    arguments = {"shard-07": ("shard-07", questions, images, phrases, settings, None, storage, plans)}
    with partition_results(pseudo_gt_boxes_shard, arguments, workers=1, compute=compute) as result:
        files = written_files(restore_events(result("shard-07")))
    return {name: pl.read_parquet(path) for name, path in files.items()}


def _without_addresses(frame: pl.DataFrame) -> list[dict]:
    """Quarantine rows with object addresses masked: PIL names the undecodable buffer by its address
    ("cannot identify image file <_io.BytesIO object at 0x7f...>"), which differs between any two runs."""
    return [
        {**row, "reason": re.sub(r" at 0x[0-9a-f]+", " at 0x…", row["reason"])}
        for row in frame.iter_rows(named=True)
    ]


def _settings(tiny_model: Path) -> PseudoGtSettings:
    return PseudoGtSettings(backend="grounding_dino", model=str(tiny_model), device="cpu", batch_size=3)


def test_pseudo_gt_on_ray_is_byte_equal_to_local(
    ray_local_cluster, single_torch_thread, tiny_model, shard, tmp_path
):
    local = _shard_tables(shard, _settings(tiny_model), ComputeSettings(), tmp_path / "local")
    remote = _shard_tables(shard, _settings(tiny_model), ComputeSettings(compute="ray"), tmp_path / "ray")

    # Not a vacuous comparison: boxes were found, and the three broken images plus the orphan are quarantined.
    boxes, quarantine = local["pseudo_gt_boxes"], local["pseudo_gt_boxes_quarantine"]
    assert int((boxes["pseudo_gt"].list.len() > 0).sum()) >= 3
    assert sorted(quarantine["record_id"].to_list()) == [
        "broken-cut.jpg",
        "broken-junk-a.jpg",
        "broken-junk-b.jpg",
        "gone-question",
    ]
    assert "'junk-b.jpg'" in quarantine.filter(pl.col("record_id") == "broken-junk-b.jpg")["reason"][0]
    assert parquet_bytes(remote["pseudo_gt_boxes"]) == parquet_bytes(boxes)
    assert _without_addresses(remote["pseudo_gt_boxes_quarantine"]) == _without_addresses(quarantine)


def test_a_worker_killed_mid_shard_is_retried_and_nothing_is_lost_or_duplicated(
    ray_local_cluster, single_torch_thread, tiny_model, shard, tmp_path
):
    local = _shard_tables(shard, _settings(tiny_model), ComputeSettings(), tmp_path / "local")
    with first_task_killed(pseudo_gt_boxes_shard.__name__, after_s=0.5) as killed:
        remote = _shard_tables(
            shard, _settings(tiny_model), ComputeSettings(compute="ray", max_retries=2), tmp_path
        )
    assert killed, "no worker was killed: the test did not test a retry"
    assert parquet_bytes(remote["pseudo_gt_boxes"]) == parquet_bytes(local["pseudo_gt_boxes"])
    assert _without_addresses(remote["pseudo_gt_boxes_quarantine"]) == _without_addresses(
        local["pseudo_gt_boxes_quarantine"]
    )
