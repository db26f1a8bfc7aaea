"""The grounding analysis on synthetic predictions with known box entropies and IoUs."""

import math

import polars as pl
import pytest

from training.eval.grounding_analysis import (
    analyse_grounding,
    best_ious,
    box_table,
    matched_ious,
    predicted_boxes,
)
from training.eval.runner import GROUNDING_INPUT_SCHEMA

REFERENCE = [{"bbox_2d": [0, 0, 100, 100], "label": "box", "validity": 0.9}]


def _completion(widths):
    lines = "".join(
        f'{{"bbox_2d": [0, 0, {width}, 100], "label": "box {k}"}}\n' for k, width in enumerate(widths)
    )
    return lines + "The boxes are on the left.</think>A"


def _prediction(run, index, widths, uncertainties, score=1.0, references=REFERENCE):
    return {
        "run_name": run,
        "item_id": f"{run}-{index}",
        "benchmark": "omnispatial",
        "prompt_format": "spatialcore",
        "family": "qwen3_vl",
        "completion": _completion(widths),
        "score": score,
        "image_width": 200,
        "image_height": 100,
        "reference_boxes": references,
        "box_uncertainties": uncertainties,
    }


def _synthetic():
    widths = [80, 70, 60, 50, 40, 30, 20, 10]  # IoU with the reference = width / 100
    entropies = [0.05, 0.10, 0.15, 0.20, 0.25, 0.30, 0.35, 0.40]
    rows = []
    for k, (width, entropy) in enumerate(zip(widths, entropies, strict=True)):
        rows.append(
            _prediction("tuned", k, [width], [entropy], score=1.0 if k < 6 else 0.0)
        )  # confident boxes are good
        rows.append(
            _prediction("base", k, [width], [entropies[-1 - k] + 0.5], score=1.0 if k < 4 else 0.0)
        )  # the reverse
    rows.append(
        _prediction("tuned", 99, [90], [0.9], references=[])
    )  # no pseudo-GT: counts for uncertainty, not IoU
    return pl.DataFrame(rows, schema=GROUNDING_INPUT_SCHEMA)


def test_quartiles_correlation_summary_and_plots(tmp_path):
    result = analyse_grounding(_synthetic(), tmp_path)
    tuned = result.quartiles.filter(pl.col("run_name") == "tuned")
    assert tuned["quartile"].to_list() == [1, 2, 3, 4] and tuned["boxes"].to_list() == [2, 2, 2, 2]
    assert tuned["mean_iou"].to_list() == pytest.approx([0.75, 0.55, 0.35, 0.15])
    base = result.quartiles.filter(pl.col("run_name") == "base")
    assert base["mean_iou"].to_list() == pytest.approx([0.15, 0.35, 0.55, 0.75])
    assert result.correlations["tuned"]["spearman_rho"] == pytest.approx(-1.0)
    assert result.correlations["base"]["spearman_rho"] == pytest.approx(1.0)
    assert result.correlations["tuned"]["boxes"] == 8

    summary = {row["run_name"]: row for row in result.summary.iter_rows(named=True)}
    assert summary["tuned"]["predictions"] == 9 and summary["tuned"]["accuracy"] == pytest.approx(700 / 9)
    assert summary["tuned"]["mean_uncertainty"] == pytest.approx(
        100 * (sum([0.05 * k for k in range(1, 9)]) + 0.9) / 9
    )
    assert summary["base"]["accuracy"] == 50.0 and summary["base"]["mean_matched_iou"] == pytest.approx(0.45)
    assert summary["tuned"]["share_with_boxes"] == 100.0 and summary["tuned"]["boxes_per_prediction"] == 1.0

    for name in ("figure4_iou_by_entropy_quartile", "figure5_accuracy_and_uncertainty"):
        path = result.plots[name]
        assert path.is_file() and path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (tmp_path / "boxes.parquet").is_file() and (tmp_path / "iou_by_entropy_quartile.csv").is_file()
    assert "Spearman" in result.markdown() and result.as_json()["correlations"]["base"]["boxes"] == 8


def test_hungarian_matching_and_misaligned_entropies(caplog):
    two_refs = [
        {"bbox_2d": [0, 0, 100, 100], "label": "a", "validity": 1.0},
        {"bbox_2d": [200, 0, 300, 100], "label": "b", "validity": 1.0},
    ]
    rows = [
        # second box overlaps the second reference only; the first matches the first
        {
            **_prediction("m", 0, [100], [0.1, 0.2], references=two_refs),
            "completion": '{"bbox_2d": [0, 0, 100, 100], "label": "a"}\n{"bbox_2d": [200, 0, 250, 100], "label": "b"}\nok</think>A',
        },
        # three entropies for one box: the entropies are not used (never shifted onto other boxes)
        _prediction("m", 1, [50], [0.1, 0.2, 0.3]),
    ]
    boxes = box_table(pl.DataFrame(rows, schema=GROUNDING_INPUT_SCHEMA)).sort("item_id", "box_index")
    assert boxes["matched_iou"].to_list() == pytest.approx([1.0, 0.5, 0.5])
    assert boxes["best_iou"].to_list() == pytest.approx([1.0, 0.5, 0.5])
    assert boxes["uncertainty"][:2].to_list() == [0.1, 0.2] and math.isnan(boxes["uncertainty"][2])
    assert "3 box uncertainties for 1 boxes" in caplog.text


def test_matched_ious_and_box_conventions():
    assert matched_ious([[0, 0, 10, 10]], [[0, 0, 10, 10], [0, 0, 5, 5]]) == [1.0]
    # two boxes on one reference: one-to-one matching leaves the second unmatched; its best overlap is kept apart
    assert matched_ious([[0, 0, 100, 100], [0, 0, 50, 100]], [[0, 0, 100, 100]]) == [1.0, 0.0]
    assert best_ious([[0, 0, 100, 100], [0, 0, 50, 100]], [[0, 0, 100, 100]]) == [1.0, 0.5]
    assert matched_ious([None], [[0, 0, 10, 10]]) == [0.0]
    assert matched_ious([[0, 0, 10, 10]], []) == [0.0]
    # Qwen2.5-VL writes pixels of the resized image; they are read back onto the grid
    ((box, label),) = predicted_boxes(
        '{"bbox_2d": [64, 48, 129, 95], "label": "cup"}\nx</think>A', "spatialcore", "qwen2_5_vl", 640, 480
    )
    assert box == [99, 101, 200, 200] and label == "cup"
    thinker = (
        '<observe>o</observe><scene>{"objects": [{"id": "cup.1", "bbox": [64, 48, 128, 96]}], "relationships": []}</scene>'
        "<think>t</think><answer>(A) x</answer>"
    )
    assert predicted_boxes(thinker, "spatialthinker", "qwen2_5_vl", 640, 480) == [
        ([100, 100, 200, 200], "cup")
    ]
    assert predicted_boxes("no boxes</think>A", "spatialcore", "qwen3_vl", 10, 10) == []
    assert predicted_boxes(None, "dge", "qwen3_vl", 10, 10) == []
