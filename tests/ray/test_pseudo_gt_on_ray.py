"""Grounding DINO on a Ray actor pool gives local mode's pseudo-GT bit for bit, even when an actor dies.

A tiny Grounding DINO (random weights, built locally) grounds the small world's OmniSpatial questions,
copied so that images repeat, with corrupt images among them: once in the process (``compute: local``)
and once as Ray Data ``map_batches`` over two actors on a real local Ray cluster. The Parquet bytes of
the two tables and the quarantine rows must be equal. Then an actor kills its own process in the middle
of the shard; Ray restarts it and reruns what it had not returned, and every forward pass comes back
once with the detections an in-process detector computes for it.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import polars as pl
import pytest

from assets.compute import ComputeSettings
from assets.grounding.detector import DetectorSettings, GroundingDinoDetector
from assets.grounding.detector_pool import DetectionActor, detect_on_ray, detect_row, plan_forward_batches
from assets.grounding.pseudo_gt import PseudoGtSettings, build_pseudo_gt
from readers.mcq import read_omnispatial
from tests.ray.conftest import parquet_bytes

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
    )
    return table, phrases


def test_pseudo_gt_on_ray_is_byte_equal_to_local(ray_local_cluster, single_torch_thread, tiny_model, shard):
    questions, phrases = shard
    settings = PseudoGtSettings(backend="grounding_dino", model=str(tiny_model), device="cpu", batch_size=3)
    local, local_log = build_pseudo_gt(questions, phrases, "shard-07", settings, progress=False)
    remote_settings = settings.model_copy(update={"compute": "ray", "ray_actors": 2})
    remote, remote_log = build_pseudo_gt(questions, phrases, "shard-07", remote_settings, progress=False)

    # Not a vacuous comparison: boxes were found, and the three broken images plus the orphan are quarantined.
    assert int((local["pseudo_gt"].list.len() > 0).sum()) >= 3
    assert sorted(row["record_id"] for row in local_log.rows) == [
        "broken-cut.jpg",
        "broken-junk-a.jpg",
        "broken-junk-b.jpg",
        "gone-question",
    ]
    assert "'junk-b.jpg'" in next(
        row["reason"] for row in local_log.rows if row["record_id"] == "broken-junk-b.jpg"
    )
    assert parquet_bytes(remote) == parquet_bytes(local)
    assert _without_addresses(remote_log.rows) == _without_addresses(local_log.rows)


def _without_addresses(rows: list[dict]) -> list[dict]:
    """Quarantine rows with object addresses masked: PIL names the undecodable buffer by its address
    ("cannot identify image file <_io.BytesIO object at 0x7f...>"), which differs between any two runs."""
    return [{**row, "reason": re.sub(r" at 0x[0-9a-f]+", " at 0x…", row["reason"])} for row in rows]


def test_a_loaded_detector_is_refused_under_ray(tiny_model, shard):
    questions, phrases = shard
    settings = PseudoGtSettings(backend="grounding_dino", model=str(tiny_model), device="cpu", compute="ray")
    detector = GroundingDinoDetector(settings)
    with pytest.raises(ValueError, match="each actor loads the model"):
        build_pseudo_gt(questions, phrases, "shard-07", settings, detector=detector, progress=False)


def test_an_actor_killed_mid_shard_is_restarted_and_nothing_is_lost_or_duplicated(
    ray_local_cluster, single_torch_thread, tiny_model, shard, tmp_path
):
    questions, phrases = shard
    records = list(
        phrases.filter(pl.col("phrases").list.len() > 0)
        .join(questions.select("question_id", "image"), on="question_id")
        .sort("question_id")
        .iter_rows(named=True)
    )
    settings = DetectorSettings(model=str(tiny_model), device="cpu", batch_size=2)
    batches = plan_forward_batches(records, settings.batch_size)
    assert len(batches) >= 6
    marker = tmp_path / "killed"

    class DyingActor(DetectionActor):
        """Kills its own process on its second pass, once for the whole pool (the marker file says so)."""

        passes = 0

        def __call__(self, batch):
            self.passes += 1
            if self.passes == 2:
                try:
                    descriptor = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
                except FileExistsError:
                    return super().__call__(batch)
                os.write(descriptor, str(os.getpid()).encode())
                os.close(descriptor)
                os._exit(1)
            return super().__call__(batch)

    compute = ComputeSettings(compute="ray", ray_actors=2)
    returned = list(detect_on_ray(batches, settings, compute, actor=DyingActor))

    assert marker.exists(), "no actor died: the test did not test a restart"
    assert [batch.index for batch, _ in returned] == [batch.index for batch in batches]
    local = GroundingDinoDetector(settings)
    for batch, detections in returned:
        assert detections == detect_row(local, batch.to_row()), f"forward pass {batch.index} differs"
