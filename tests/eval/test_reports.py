"""Paper-layout tables (with the published rows) and the report files."""

import csv
import json

import polars as pl
import pytest

from data_contracts.eval_report import EvalReport
from data_contracts.validation import polars_schema
from training.eval.reports import (
    SPATIALTHINKER_COLUMNS,
    build_paper_tables,
    build_report,
    console_lines,
    fill_spatialthinker,
    published_rows,
    write_report,
)


def _score(
    run, benchmark, item, category, status, *, task_type="", source="", key=None, flipped=False, circular=0
):
    return {
        "run_name": run,
        "benchmark": benchmark,
        "item_id": item,
        "model": "m",
        "adapter": None,
        "backend": "transformers",
        "prompt_format": "spatialcore",
        "category": category,
        "task_type": task_type,
        "source": source or benchmark,
        "question_key": key or item,
        "flipped": flipped,
        "circular_index": circular,
        "answer_format": "choice",
        "gold": "A",
        "completion": "</think>A",
        "finish_reason": "stop",
        "predicted": "A" if status == "correct" else None,
        "status": status,
        "score": 1.0 if status == "correct" else 0.0,
        "n_boxes": 0,
        "box_uncertainty": None,
        "matched_iou": None,
    }


def _frame(rows):
    return pl.DataFrame(rows, schema=polars_schema(EvalReport))


def test_published_rows_are_shipped():
    table1 = published_rows("spatialcore_table1_omnispatial.csv")
    spatialcore = next(row for row in table1 if row.method == "SpatialCORE-8B")
    assert spatialcore.values["average"] == 48.46 and spatialcore.values["geometric_reasoning"] == 36.77
    assert len(published_rows("spatialcore_table2_spatialab.csv")) == 25
    thinker = {row.method: row for row in published_rows("spatialthinker_spatial_vqa.csv")}
    assert thinker["SpatialThinker-7B"].values["cvbench_avg"] == 78.2
    assert thinker["RoboPoint-13B"].values["3dsrbench"] is None  # "–" in the paper


def test_omnispatial_table_is_sample_weighted():
    rows = [
        _score("run", "omnispatial", "a1", "Motion_Analysis", "correct"),
        _score("run", "omnispatial", "a2", "Motion_Analysis", "wrong"),
        _score("run", "omnispatial", "a3", "Motion_Analysis", "unparseable"),
        _score("run", "omnispatial", "b1", "Egocentric", "correct"),
        _score(
            "run", "omnispatial", "b1#circular1", "Egocentric", "wrong", key="b1", circular=1
        ),  # not an original item
    ]
    tables = {table.key: table for table in build_paper_tables(_frame(rows))}
    assert set(tables) == {"spatialcore_table1"}
    row = tables["spatialcore_table1"].rows[-1]
    assert row.method == "run" and not row.published
    assert row.values["average"] == pytest.approx(50.0)  # 2 of 4 original items, not the mean of 33.3 and 100
    assert row.values["motion_analysis"] == pytest.approx(100 / 3) and row.values["egocentric"] == 100.0
    assert row.values["manipulation"] is None and row.counts["motion_analysis"] == 3


def test_spatialthinker_columns():
    rows = [
        _score("r", "cvbench", "c1", "Count", "correct", task_type="2D", source="ADE20K"),
        _score("r", "cvbench", "c2", "Count", "wrong", task_type="2D", source="COCO"),
        _score("r", "cvbench", "c3", "Relation", "correct", task_type="2D", source="COCO"),
        _score("r", "cvbench", "c4", "Depth", "correct", task_type="3D", source="Omni3D"),
        _score("r", "blink", "b1", "Spatial_Relation", "correct"),
        _score("r", "blink", "b2", "Relative_Depth", "wrong"),
        _score("r", "3dsrbench", "t1", "height_higher", "correct", key="q1"),
        _score("r", "3dsrbench", "t1-1", "height_higher", "wrong", key="q1", circular=1),
        _score("r", "3dsrbench", "t2", "location_above", "correct", key="q2"),
        _score("r", "3dsrbench", "t2-1", "location_above", "correct", key="q2", circular=1),
    ]
    values, counts = fill_spatialthinker(_frame(rows), SPATIALTHINKER_COLUMNS)
    assert values["cvbench_2d"] == pytest.approx(
        75.0
    )  # mean of ADE20K (100) and COCO (50), as CV-Bench defines it
    assert values["cvbench_3d"] == 100.0 and values["cvbench_avg"] == pytest.approx(87.5)
    assert (values["blink_relation"], values["blink_depth"], values["blink_avg"]) == (100.0, 0.0, 50.0)
    assert values["3dsrbench"] == 50.0 and counts["3dsrbench"] == 2  # CircularEval over the two questions


def test_report_files(tmp_path):
    rows = [
        _score("base", "spatialab", "s1", "3D Geometry", "correct"),
        _score("base", "spatialab", "s2", "Depth & Occlusion", "truncated"),
        _score("tuned", "spatialab", "s1", "3D Geometry", "correct"),
        _score("tuned", "spatialab", "s2", "Depth & Occlusion", "correct"),
    ]
    report = build_report(_frame(rows), [{"run_name": "base", "model": "m", "backend": "transformers"}])
    paths = write_report(report, tmp_path)
    markdown = paths["markdown"].read_text()
    assert "SpatialCORE Table 2" in markdown and "SpatialCORE-8B" in markdown and "**tuned**" in markdown
    assert "| base | spatialab | accuracy 50.00 (2 items) | 2 | 50.00 | 1 | 0 | 0 | 1 | 0 |" in markdown
    assert (
        "| **base** | 50.00 (2) | 100.00 (1) | 0.00 (1) | – (0) | – (0) | – (0) | – (0) | 0 of 2 |"
        in markdown
    )
    with paths["csv"].open() as handle:
        records = list(csv.DictReader(handle))
    tuned = [
        r
        for r in records
        if r["table"] == "spatialcore_table2" and r["method"] == "tuned" and r["column"] == "average"
    ]
    assert float(tuned[0]["value"]) == 100.0 and tuned[0]["n"] == "2"
    assert any(
        r["column"] == "count:truncated" and r["method"] == "base" and float(r["value"]) == 1.0
        for r in records
    )
    data = json.loads(paths["json"].read_text())
    assert data["benchmarks"]["base"]["spatialab"]["overall"]["truncated"] == 1
    assert data["tables"][0]["key"] == "spatialcore_table2"


def _threedsr_rows(run, golds_and_answers):
    """3DSRBench score rows: (qid, category type, gold, answer) -> one row per variant."""
    rows = []
    for qid, kind, gold, answer in golds_and_answers:
        key = qid.removesuffix("-flip").split("-")[0]
        flipped = "-flip" in qid
        circular = int(qid.rsplit("-", 1)[1]) if qid.rsplit("-", 1)[-1].isdigit() else 0
        status = "correct" if answer == gold else "wrong"
        row = _score(run, "3dsrbench", qid, f"{kind}_x", status, task_type=kind, key=key)
        row.update(flipped=flipped, circular_index=circular)
        rows.append(row)
    return rows


def test_3dsrbench_paper_column_counts_the_flipped_questions():
    # No rotations in the file: the originals are all "A", the flipped questions "B". The paper column
    # used to keep only the unflipped rows, so always answering "A" scored 100.00.
    rows = _threedsr_rows(
        "always-a",
        [
            ("q1", "orientation", "A", "A"),
            ("q1-flip", "orientation", "B", "A"),
            ("q2", "height", "A", "A"),
            ("q2-flip", "height", "A", "A"),
        ],
    )
    report = build_report(_frame(rows))
    thinker = next(t for t in report.tables if t.key == "spatialthinker_spatial_vqa").rows[-1]
    threedsr = next(t for t in report.tables if t.key == "3dsrbench").rows[-1]
    assert thinker.values["3dsrbench"] == 75.0 and thinker.counts["3dsrbench"] == 4  # 3 of 4 questions
    assert (threedsr.values["vanilla"], threedsr.values["circular_eval"], threedsr.values["flip_eval"]) == (
        75.0,
        75.0,
        50.0,  # q1 fails on its flipped counterpart
    )
    assert threedsr.values["orientation"] == 50.0 and threedsr.values["height"] == 100.0
    line = console_lines(report, "always-a")[0]
    assert line.startswith(
        "always-a 3dsrbench: CircularEval 75.00% on 4 questions; vanilla 75.00% on 4 items"
    )
    assert "FlipEval 50.00% on 2 questions" in line


def test_failed_answers_are_marked_in_every_table(tmp_path):
    rows = [
        _score("api", "omnispatial", "o1", "Egocentric", "correct"),
        _score("api", "omnispatial", "o2", "Egocentric", "error"),
        _score("api", "cvbench", "c1", "Count", "error", task_type="2D", source="COCO"),
        _score("api", "cvbench", "c2", "Depth", "correct", task_type="3D", source="Omni3D"),
    ]
    report = build_report(_frame(rows))
    for table in report.tables:
        row = table.rows[-1]
        assert (row.method, row.failed, row.answers) in (("api", 1, 2),), table.key
    markdown = write_report(report, tmp_path)["markdown"].read_text()
    assert markdown.count("**Failed requests:** api: 1 of 2 answers") == 2  # both paper tables
    assert "| Egocentric | 2 | 50.00 | 0 | 0 | 1 |" in markdown  # the category table's Failed column
    with (tmp_path / "report.csv").open() as handle:
        failed = [r for r in csv.DictReader(handle) if r["column"] == "failed"]
    assert {(r["table"], r["value"], r["n"]) for r in failed} == {
        ("spatialcore_table1", "1.0", "2"),
        ("spatialthinker_spatial_vqa", "1.0", "2"),
    }
    data = json.loads((tmp_path / "report.json").read_text())
    assert all(row["failed"] is None for row in data["tables"][0]["rows"] if row["published"])
