"""finalize_table: contract split, quarantine and the blocking contract check."""

import polars as pl
from PIL import Image

from assets.tables import finalize_table
from data_contracts import mcq_questions
from data_contracts.images import encode_image, image_sha256
from data_contracts.quarantine import QuarantineLog
from data_contracts.validation import polars_schema

IMAGE = encode_image(Image.new("RGB", (4, 4)), path="a.png")


def _row(question_id, answer_index, answer):
    return {
        "question_id": question_id,
        "image": IMAGE,
        "image_sha256": image_sha256(IMAGE),
        "image_width": 4,
        "image_height": 4,
        "question": "q",
        "options": ["a", "b"],
        "answer_index": answer_index,
        "answer": answer,
        "task_type": "t",
        "sub_task_type": "s",
        "split": "train",
        "source": "x",
        "origin": "real",
    }


def _finalize(rows):
    log = QuarantineLog("mcq_questions")
    frame = pl.DataFrame(rows, schema=polars_schema(mcq_questions.McqQuestionsWithImage))
    checked = finalize_table(
        frame, mcq_questions.McqQuestionsWithImage, "1.0.0", asset_key="mcq_questions", quarantine=log
    )
    return checked, log


def test_clean_frame_passes():
    checked, log = _finalize([_row("1", 0, "A"), _row("2", 1, "B")])
    assert checked.check.passed and checked.frame.height == 2 and len(log) == 0


def test_row_breaking_the_contract_fails_the_check_and_is_kept_in_quarantine():
    checked, log = _finalize([_row("1", 0, "A"), _row("2", 1, "A")])  # letter disagrees with the index
    assert not checked.check.passed
    assert checked.frame["question_id"].to_list() == ["1"]
    assert len(log) == 1 and "letter_matches_index" in log.rows[0]["reason"]
    assert checked.metadata["quarantined"] == 1
