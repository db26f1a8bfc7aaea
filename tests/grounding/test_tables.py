"""Coverage counts, the audit loop, corrupted pseudo-GT, the training table and the SFT cold start."""

from __future__ import annotations

import csv

import numpy as np
import polars as pl
import pytest

from assets.grounding import audit
from assets.grounding.cold_start import ColdStartSettings, build_cold_start
from assets.grounding.corruption import CorruptionSettings, box_iou, corrupt_pseudo_gt
from assets.grounding.coverage import (
    coverage_counts,
    gallery_image,
    histogram_image,
    validity_histogram,
    validity_values,
)
from assets.grounding.shards import NUM_SHARDS, SHARD_KEYS, shard_of
from assets.grounding.training_table import build_spatialcore_train
from data_contracts.sft_cold_start import SftColdStart
from data_contracts.spatialcore_train import SpatialcoreTrain
from data_contracts.validation import check_frame, polars_schema, split_valid
from tests.fakes.llm_servers import request_text


def _item(box, label, validity=0.9):
    return {"bbox_2d": box, "label": label, "validity": validity}


@pytest.fixture(scope="module")
def training_frame(world_questions) -> pl.DataFrame:
    """The small world's questions with made-up pseudo-GT on all but the last one (the table is sorted by id)."""
    ids = sorted(world_questions["question_id"].to_list())
    boxes = pl.DataFrame(
        {
            "question_id": ids[:-1],
            "pseudo_gt": [
                [
                    _item([100, 100, 300, 300], "red box", 0.35 + 0.1 * index),
                    _item([500, 500, 700, 900], "green plant", 0.95),
                ]
                for index in range(len(ids) - 1)
            ],
        },
        schema_overrides={"pseudo_gt": polars_schema(SpatialcoreTrain)["pseudo_gt"]},
    )
    return build_spatialcore_train(world_questions, boxes)


class TestTrainingTable:
    def test_join_keeps_every_question_and_the_contract(self, training_frame, world_questions):
        assert training_frame.columns == list(polars_schema(SpatialcoreTrain))
        assert training_frame.height == world_questions.height
        assert check_frame(training_frame, SpatialcoreTrain).passed
        assert training_frame["pseudo_gt"].list.len().to_list()[-1] == 0  # no reference: empty, not null
        gold = world_questions.sort("question_id").select("answer_index", "answer")
        assert training_frame.select("answer_index", "answer").equals(gold)

    def test_other_sources_are_left_out(self, world_questions):
        spatialab = world_questions.head(1).with_columns(
            pl.lit("spatialab").alias("source"), pl.lit("spatialab/1").alias("question_id")
        )
        boxes = pl.DataFrame(
            {"question_id": [], "pseudo_gt": []},
            schema={"question_id": pl.String, "pseudo_gt": polars_schema(SpatialcoreTrain)["pseudo_gt"]},
        )
        frame = build_spatialcore_train(pl.concat([world_questions, spatialab]), boxes)
        assert "spatialab/1" not in frame["question_id"].to_list()

    @pytest.mark.parametrize(
        ("change", "rule"),
        [
            ({"answer": "D"}, "letter_matches_index"),  # the letter must be the index's letter
            ({"pseudo_gt": [[_item([300, 100, 200, 400], "cup")]]}, "pseudo_gt_boxes_are_ordered"),  # x2 < x1
        ],
    )
    def test_contract_rejects_bad_rows(self, training_frame, change, rule):
        bad = training_frame.head(1).with_columns(
            *[
                pl.Series(
                    name, value if isinstance(value, list) else [value], dtype=training_frame.schema[name]
                )
                for name, value in change.items()
            ]
        )
        _, invalid, _ = split_valid(
            pl.concat([training_frame, bad.with_columns(pl.lit("x").alias("question_id"))]), SpatialcoreTrain
        )
        assert invalid.height == 1 and rule in invalid["reason"][0]


def test_coverage_counts_as_the_paper(training_frame):
    phrases = pl.DataFrame(
        {
            "question_id": training_frame["question_id"],
            "task_type": training_frame["task_type"],
            "skipped": [index == 0 for index in range(training_frame.height)],
            "phrases": [["red box"]] * (training_frame.height - 1) + [[]],
        }
    )
    report = coverage_counts(phrases, training_frame)
    localizable = training_frame.height - 1
    assert (report.samples, report.skipped, report.localizable) == (training_frame.height, 1, localizable)
    assert report.with_queries == localizable - 1  # the last question has no phrase
    assert report.with_valid_box == localizable - 1  # the skipped first one has boxes but does not count
    assert report.coverage_of_queried == 1.0
    assert report.coverage_of_localizable == pytest.approx((localizable - 1) / localizable)
    assert sum(counts["samples"] for counts in report.by_task_type.values()) == report.samples
    assert "| **all** |" in report.markdown()


def test_validity_histogram_and_pictures(training_frame):
    values = validity_values(training_frame)
    histogram = validity_histogram(values)
    assert sum(histogram.values()) == len(values) == 2 * (training_frame.height - 1)
    assert histogram["0.90-1.00"] >= training_frame.height - 1
    assert histogram_image(histogram).size[0] > 100
    assert gallery_image(training_frame, count=2).size[0] > 0
    assert gallery_image(training_frame.head(0)) is None


class TestAudit:
    def test_export_review_import(self, training_frame, tmp_path):
        frame = audit.sample_audit(training_frame, audit.AuditSettings(samples=3, seed=1))
        assert frame["question_id"].n_unique() == 3 and frame.height == 6  # every box of the drawn samples
        verdicts_path = audit.write_review_files(frame, tmp_path)
        rows = list(csv.DictReader(verdicts_path.open()))
        assert [row["audit_id"] for row in rows] == frame["audit_id"].to_list()
        assert all((tmp_path / row["image_file"]).is_file() for row in rows)
        for index, row in enumerate(rows):
            row["correct"] = ["yes", "0", "", "maybe", "1", "true"][index]
        with verdicts_path.open("w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
        verdicts = audit.read_verdicts(verdicts_path)
        assert verdicts.unreviewed == 1 and len(verdicts.problems) == 1 and len(verdicts.correct) == 4
        table, stale = audit.precision_by_bin(frame, verdicts)
        overall = table.filter(pl.col("confidence_bin") == "all").row(0, named=True)
        assert (overall["audited"], overall["correct"], stale) == (4, 3, [])
        assert overall["ci_low"] < overall["precision"] == 0.75 < overall["ci_high"]
        assert audit.precision_plot(table).size[0] > 100

    def test_a_new_export_keeps_entered_verdicts(self, training_frame, tmp_path):
        frame = audit.sample_audit(training_frame, audit.AuditSettings(samples=2, seed=0))
        path = audit.write_review_files(frame, tmp_path)
        rows = list(csv.DictReader(path.open()))
        rows[0]["correct"] = "1"
        with path.open("w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
        audit.write_review_files(frame, tmp_path)
        assert audit.read_verdicts(path).correct == {rows[0]["audit_id"]: True}

    @pytest.mark.parametrize(
        ("value", "expected"),
        [(0.3, "0.30-0.50"), (0.69, "0.50-0.70"), (0.7, "0.70-0.90"), (1.0, "0.90-1.00"), (0.1, "<0.30")],
    )
    def test_confidence_bins(self, value, expected):
        assert audit.confidence_bin(value) == expected

    def test_wilson_interval_of_the_paper_audit(self):
        low, high = audit.wilson_interval(251, 262)  # 95.8% overall precision
        assert low < 251 / 262 < high and audit.wilson_interval(0, 0) == (0.0, 1.0)


class TestCorruption:
    def test_fraction_modes_and_iou(self, training_frame):
        corrupted, stats = corrupt_pseudo_gt(training_frame, CorruptionSettings(fraction=0.5, seed=3))
        assert stats.chosen == round(0.5 * stats.boxes) and sum(stats.by_mode.values()) == stats.chosen
        removed = stats.by_mode.get("remove", 0)
        assert corrupted["pseudo_gt"].list.len().sum() == stats.boxes - removed
        assert corrupted.drop("pseudo_gt").equals(training_frame.drop("pseudo_gt"))
        for before, after in zip(
            training_frame["pseudo_gt"].to_list(), corrupted["pseudo_gt"].to_list(), strict=False
        ):
            originals = {item["label"]: item["bbox_2d"] for item in before}
            for item in after:
                assert item["label"] in originals  # relabelled only to another object of the same sample
        assert check_frame(corrupted, SpatialcoreTrain).passed

    def test_displaced_boxes_overlap_less_than_the_bound(self, training_frame):
        corrupted, stats = corrupt_pseudo_gt(
            training_frame, CorruptionSettings(fraction=1.0, modes=["displace"])
        )
        assert stats.by_mode == {"displace": stats.boxes}
        for before, after in zip(
            training_frame["pseudo_gt"].to_list(), corrupted["pseudo_gt"].to_list(), strict=False
        ):
            for original, moved in zip(before, after, strict=True):
                assert box_iou(original["bbox_2d"], moved["bbox_2d"]) < 0.6

    def test_seeded(self, training_frame):
        first, _ = corrupt_pseudo_gt(training_frame, CorruptionSettings(seed=7))
        second, _ = corrupt_pseudo_gt(training_frame, CorruptionSettings(seed=7))
        other, _ = corrupt_pseudo_gt(training_frame, CorruptionSettings(seed=8))
        assert first.equals(second) and not first.equals(other)

    def test_relabel_needs_another_label(self):
        frame = pl.DataFrame({"question_id": ["q"], "pseudo_gt": [[_item([0, 0, 10, 10], "cup")]]})
        _, stats = corrupt_pseudo_gt(frame, CorruptionSettings(fraction=1.0, modes=["relabel"]))
        assert "relabel" not in stats.by_mode and stats.chosen == 1


def test_large_boxes_can_still_be_displaced():
    from assets.grounding.corruption import displace_box

    rng = np.random.default_rng(0)
    for box in ([0, 0, 1000, 1000], [0, 0, 900, 950], [10, 10, 11, 11]):
        assert box_iou(box, displace_box(box, rng)) < 0.6


def test_shards_are_stable_and_cover_every_key():
    ids = [f"omnispatial/{index}_0" for index in range(400)]
    assignment = [shard_of(question_id) for question_id in ids]
    assert set(assignment) == set(SHARD_KEYS) and len(SHARD_KEYS) == NUM_SHARDS
    assert assignment == [shard_of(question_id) for question_id in ids]


class TestColdStart:
    def test_template_targets(self, training_frame):
        frame, log, backend = build_cold_start(training_frame, ColdStartSettings(samples=4))
        assert (
            frame.height == min(4, training_frame.filter(pl.col("split") == "train").height) and len(log) == 0
        )
        assert backend == "template" and check_frame(frame, SftColdStart).passed
        first = frame.row(0, named=True)
        if first["pseudo_gt"]:
            assert first["completion"].startswith('{"bbox_2d": ')
        assert first["completion"].endswith(f"</think>\n\n{first['answer']}")

    def test_llm_reasoning_with_quarantine(self, training_frame, llm_server_factory, tmp_path):
        from model_clients import LLMClient, LLMClientConfig

        failing = training_frame["question_id"][0]
        failing_question = training_frame["question"][0]

        def responder(body):
            if failing_question in request_text(body):
                return "no JSON here"
            return {"reasoning": "The box is left of the plant, so the plant is farther."}

        server = llm_server_factory("openai", responder=responder)
        config = LLMClientConfig(
            base_url=server.base_url,
            api_key="sk-test-0000000000",
            cache_path=tmp_path / "c.sqlite",
            backoff_base_s=0.01,
        )
        with LLMClient(config) as client:
            frame, log, backend = build_cold_start(
                training_frame,
                ColdStartSettings(samples=100, reasoning="llm"),
                llm_client=client,
                progress=False,
            )
        assert backend.startswith("openai/gpt-4o-mini/sft_reasoning@")
        questions_sharing_the_text = training_frame.filter(pl.col("question") == failing_question).height
        assert failing not in frame["question_id"].to_list()
        assert len(log) == questions_sharing_the_text
        assert frame.height == training_frame.height - questions_sharing_the_text
        assert all("The box is left of the plant" in text for text in frame["completion"])
        assert check_frame(frame, SftColdStart).passed
