"""Grounding analysis (SpatialCORE Figures 4 and 5): is the model's box confidence a sign of good boxes?

For every prediction: the boxes it drew in its reasoning, each box's coordinate-digit uncertainty
``H`` (normalised full-vocabulary entropy of its digit tokens from one scoring pass of the model, as
in the reward, Eq. 5) and its matched IoU with the item's reference boxes (pseudo-GT): predicted and
reference boxes are matched one-to-one by the Hungarian algorithm on IoU; an unmatched predicted box
has IoU 0. Then, per model:

* mean matched IoU per quartile of ``H`` (quartiles computed per model; Q1 is the most confident);
* Spearman's rank correlation between ``H`` and matched IoU;
* answer accuracy and mean box uncertainty (in percent), boxes per prediction, share of predictions
  with boxes, mean matched IoU;

and two PNG plots: matched IoU by entropy quartile (Figure 4), accuracy and uncertainty (Figure 5).

Input: one row per prediction with ``run_name, item_id, prompt_format, family, completion, score,
image_width, image_height, reference_boxes`` and ``box_uncertainties`` (one ``H`` per valid reasoning
box, in order; empty or null without an entropy pass).

>>> boxes = pl.DataFrame({"run_name": ["m"] * 4, "uncertainty": [0.1, 0.2, 0.3, 0.4], "matched_iou": [0.9, 0.7, 0.5, 0.1]})
>>> entropy_quartiles(boxes)["mean_iou"].round(2).to_list()
[0.9, 0.7, 0.5, 0.1]
>>> round(entropy_iou_correlation(boxes)["m"]["spearman_rho"], 2)
-1.0
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from data_contracts.boxes import BoxError, from_model_convention, pixels_to_grid
from training.rewards.geometry import pairwise_iou
from training.rewards.matching import hungarian_max
from training.rewards.parsing import parse_spatialcore, parse_spatialthinker

logger = logging.getLogger(__name__)

QUARTILES = 4
BOX_COLUMNS = {
    "run_name": pl.String(),
    "item_id": pl.String(),
    "box_index": pl.Int64(),
    "label": pl.String(),
    "bbox_2d": pl.List(pl.Int64()),
    "uncertainty": pl.Float64(),
    "matched_iou": pl.Float64(),
    "best_iou": pl.Float64(),
    "score": pl.Float64(),
}


def predicted_boxes(
    completion: str | None, prompt_format: str, family: str, width: int, height: int
) -> list[tuple[list[int] | None, str]]:
    """The boxes a completion drew, on the 0..1000 grid, in order, with their labels.

    SpatialCORE completions: the valid boxes of the reasoning segment (the ones the reward scores and
    the entropies are computed for), read in the family's convention. SpatialThinker completions:
    the scene objects, in original-image pixels. A box that cannot be put on the grid stays in the
    list as ``None`` so the order keeps matching the per-box entropies.

    >>> predicted_boxes('{"bbox_2d": [100, 100, 300, 400], "label": "cup"}\\nleft</think>A', "spatialcore", "qwen3_vl", 640, 480)
    [([100, 100, 300, 400], 'cup')]
    """
    if not completion:
        return []
    boxes: list[tuple[list[int] | None, str]] = []
    if prompt_format == "spatialcore":
        for box in parse_spatialcore(completion).grounding_boxes:
            try:
                boxes.append((from_model_convention(list(box.coords), family, width, height), box.label))
            except BoxError:
                boxes.append((None, box.label))
    elif prompt_format == "spatialthinker":
        for obj in parse_spatialthinker(completion).objects:
            try:
                boxes.append((pixels_to_grid(list(obj.bbox), width, height), obj.name))
            except BoxError:
                boxes.append((None, obj.name))
    return boxes


def matched_ious(predicted: list[list[int] | None], references: list[list[int]]) -> list[float]:
    """Per predicted box, its IoU with the reference box the Hungarian matching (max total IoU) gives it.

    Unmatched and unreadable predicted boxes get 0.

    >>> matched_ious([[0, 0, 10, 10], [50, 50, 60, 60], None], [[0, 0, 10, 20]])
    [0.5, 0.0, 0.0]
    """
    result = [0.0] * len(predicted)
    readable = [index for index, box in enumerate(predicted) if box is not None]
    if not readable or not references:
        return result
    iou = pairwise_iou([predicted[index] for index in readable], references)
    rows, cols = hungarian_max(iou)
    for row, col in zip(rows.tolist(), cols.tolist(), strict=True):
        result[readable[row]] = float(iou[row, col])
    return result


def best_ious(predicted: list[list[int] | None], references: list[list[int]]) -> list[float]:
    """Per predicted box, its largest IoU with any reference box (no one-to-one constraint); 0 when unreadable.

    >>> best_ious([[0, 0, 10, 10], [0, 0, 10, 20]], [[0, 0, 10, 20]])
    [0.5, 1.0]
    """
    result = [0.0] * len(predicted)
    readable = [index for index, box in enumerate(predicted) if box is not None]
    if not readable or not references:
        return result
    iou = pairwise_iou([predicted[index] for index in readable], references)
    for row, index in enumerate(readable):
        result[index] = float(iou[row].max())
    return result


def box_table(predictions: pl.DataFrame) -> pl.DataFrame:
    """One row per predicted box: grid box, label, uncertainty ``H``, Hungarian-matched IoU and best IoU.

    The IoUs are null for items without reference boxes; the quartile analysis uses the matched IoU,
    as the paper does; ``best_iou`` (largest overlap with any reference box) is kept beside it.
    """
    rows = []
    for record in predictions.iter_rows(named=True):
        boxes = predicted_boxes(
            record.get("completion"),
            record["prompt_format"],
            record["family"],
            int(record["image_width"]),
            int(record["image_height"]),
        )
        uncertainties = list(record.get("box_uncertainties") or [])
        if uncertainties and len(uncertainties) != len(boxes):
            logger.warning(
                "item %s: %d box uncertainties for %d boxes; its uncertainties are left out",
                record["item_id"],
                len(uncertainties),
                len(boxes),
            )
            uncertainties = []
        references = [
            list(ref["bbox_2d"])
            for ref in (record.get("reference_boxes") or [])
            if (ref.get("validity") or 0) > 0
        ]
        ious = matched_ious([box for box, _ in boxes], references) if references else [None] * len(boxes)
        best = best_ious([box for box, _ in boxes], references) if references else [None] * len(boxes)
        for index, (box, label) in enumerate(boxes):
            rows.append(
                {
                    "run_name": record["run_name"],
                    "item_id": record["item_id"],
                    "box_index": index,
                    "label": label,
                    "bbox_2d": box,
                    "uncertainty": float(uncertainties[index]) if uncertainties else math.nan,
                    "matched_iou": ious[index],
                    "best_iou": best[index],
                    "score": float(record.get("score") or 0.0),
                }
            )
    return pl.DataFrame(rows, schema=BOX_COLUMNS)


def _usable(boxes: pl.DataFrame) -> pl.DataFrame:
    return boxes.filter(
        pl.col("uncertainty").is_not_nan()
        & pl.col("uncertainty").is_not_null()
        & pl.col("matched_iou").is_not_null()
    )


def entropy_quartiles(boxes: pl.DataFrame, quartiles: int = QUARTILES) -> pl.DataFrame:
    """Mean matched IoU per quartile of ``H``, quartiles taken within each model (Q1 = lowest entropy).

    Ranks break ties in table order, so every quartile holds a quarter of the boxes (up to rounding).
    """
    usable = _usable(boxes)
    schema = {
        "run_name": pl.String,
        "quartile": pl.Int64,
        "boxes": pl.Int64,
        "mean_iou": pl.Float64,
        "min_uncertainty": pl.Float64,
        "max_uncertainty": pl.Float64,
    }
    if usable.height == 0:
        return pl.DataFrame(schema=schema)
    ranked = usable.with_columns(
        (
            (pl.col("uncertainty").rank("ordinal").over("run_name") - 1)
            * quartiles
            // pl.len().over("run_name")
            + 1
        )
        .cast(pl.Int64)
        .alias("quartile")
    )
    return (
        ranked.group_by("run_name", "quartile", maintain_order=True)
        .agg(
            pl.len().cast(pl.Int64).alias("boxes"),
            pl.col("matched_iou").mean().alias("mean_iou"),
            pl.col("uncertainty").min().alias("min_uncertainty"),
            pl.col("uncertainty").max().alias("max_uncertainty"),
        )
        .sort("run_name", "quartile")
        .select(list(schema))
    )


def entropy_iou_correlation(boxes: pl.DataFrame) -> dict[str, dict[str, float]]:
    """Spearman's rho (and its p-value) between ``H`` and matched IoU, per model; NaN below 3 boxes or when constant."""
    from scipy.stats import spearmanr

    result: dict[str, dict[str, float]] = {}
    usable = _usable(boxes)
    for (run,), group in usable.group_by("run_name", maintain_order=True):
        uncertainty = group["uncertainty"].to_numpy()
        iou = group["matched_iou"].to_numpy()
        rho, p_value = math.nan, math.nan
        if group.height >= 3 and np.ptp(uncertainty) > 0 and np.ptp(iou) > 0:
            statistic = spearmanr(uncertainty, iou)
            rho, p_value = float(statistic.statistic), float(statistic.pvalue)
        result[str(run)] = {"spearman_rho": rho, "p_value": p_value, "boxes": int(group.height)}
    return result


def model_summary(predictions: pl.DataFrame, boxes: pl.DataFrame) -> pl.DataFrame:
    """Per model: accuracy and mean box uncertainty (both in percent), boxes per prediction, share with boxes, mean IoU."""
    per_prediction = boxes.group_by("run_name", "item_id").agg(pl.len().alias("n_boxes"))
    counted = (
        predictions.select("run_name", "item_id", "score")
        .join(per_prediction, on=["run_name", "item_id"], how="left")
        .with_columns(pl.col("n_boxes").fill_null(0))
    )
    answers = counted.group_by("run_name", maintain_order=True).agg(
        pl.len().alias("predictions"),
        (pl.col("score").mean() * 100.0).alias("accuracy"),
        pl.col("n_boxes").mean().alias("boxes_per_prediction"),
        ((pl.col("n_boxes") > 0).mean() * 100.0).alias("share_with_boxes"),
    )
    finite = boxes.filter(pl.col("uncertainty").is_not_nan())
    uncertainty = finite.group_by("run_name").agg(
        (pl.col("uncertainty").mean() * 100.0).alias("mean_uncertainty")
    )
    iou = (
        boxes.filter(pl.col("matched_iou").is_not_null())
        .group_by("run_name")
        .agg(pl.col("matched_iou").mean().alias("mean_matched_iou"))
    )
    return answers.join(uncertainty, on="run_name", how="left").join(iou, on="run_name", how="left")


def plot_iou_by_quartile(quartiles: pl.DataFrame, path: str | Path) -> Path:
    """Figure 4: mean matched IoU per entropy quartile, one bar group per quartile, one bar per model."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = quartiles["run_name"].unique(maintain_order=True).to_list()
    figure, axis = plt.subplots(figsize=(6.4, 4.0))
    width = 0.8 / max(len(runs), 1)
    positions = np.arange(1, QUARTILES + 1)
    for offset, run in enumerate(runs):
        rows = quartiles.filter(pl.col("run_name") == run)
        values = dict(zip(rows["quartile"].to_list(), rows["mean_iou"].to_list(), strict=True))
        axis.bar(
            positions + (offset - (len(runs) - 1) / 2) * width,
            [values.get(int(q), 0.0) for q in positions],
            width,
            label=run,
        )
    axis.set_xticks(positions, [f"Q{q}" for q in positions])
    axis.set_xlabel("coordinate-token entropy quartile (Q1 = most confident)")
    axis.set_ylabel("mean matched IoU with pseudo-GT")
    axis.set_ylim(0, 1)
    if runs:
        axis.legend(fontsize="small")
    axis.set_title("Matched IoU by box-entropy quartile")
    figure.tight_layout()
    output = Path(path)
    output.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(output, dpi=120)
    plt.close(figure)
    return output


def plot_accuracy_and_uncertainty(summary: pl.DataFrame, path: str | Path) -> Path:
    """Figure 5: answer accuracy and mean box uncertainty per model, side by side."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = summary["run_name"].to_list()
    figure, axes = plt.subplots(1, 2, figsize=(8.0, 3.6))
    for axis, column, title in (
        (axes[0], "accuracy", "Answer accuracy (%)"),
        (axes[1], "mean_uncertainty", "Box uncertainty (%)"),
    ):
        values = [
            value if value is not None and math.isfinite(value) else 0.0
            for value in summary[column].to_list()
        ]
        bars = axis.bar(range(len(runs)), values, color=[f"C{index % 10}" for index in range(len(runs))])
        axis.bar_label(bars, fmt="%.1f", fontsize="small")
        axis.set_xticks(range(len(runs)), runs, rotation=20, ha="right", fontsize="small")
        axis.set_ylim(0, 100)
        axis.set_title(title)
    figure.tight_layout()
    output = Path(path)
    output.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(output, dpi=120)
    plt.close(figure)
    return output


@dataclass
class GroundingResult:
    """The analysis: per-box table, quartile table, per-model summary, correlations and the plot files."""

    boxes: pl.DataFrame
    quartiles: pl.DataFrame
    summary: pl.DataFrame
    correlations: dict[str, dict[str, float]]
    plots: dict[str, Path] = field(default_factory=dict)

    def markdown(self) -> str:
        """Both tables as Markdown."""
        lines = [
            "| Run | Predictions | Accuracy | Box uncertainty | Boxes / prediction | With boxes (%) | Mean matched IoU | Spearman rho |",
            "|---|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for row in self.summary.iter_rows(named=True):
            rho = self.correlations.get(row["run_name"], {}).get("spearman_rho", math.nan)
            lines.append(
                f"| {row['run_name']} | {row['predictions']} | {_fmt(row['accuracy'])} | {_fmt(row['mean_uncertainty'])} | "
                f"{_fmt(row['boxes_per_prediction'])} | {_fmt(row['share_with_boxes'])} | {_fmt(row['mean_matched_iou'], 3)} | {_fmt(rho, 3)} |"
            )
        lines += ["", "| Run | Quartile | Boxes | Mean matched IoU | H range |", "|---|---:|---:|---:|---|"]
        for row in self.quartiles.iter_rows(named=True):
            lines.append(
                f"| {row['run_name']} | Q{row['quartile']} | {row['boxes']} | {_fmt(row['mean_iou'], 3)} | "
                f"{_fmt(row['min_uncertainty'], 3)}–{_fmt(row['max_uncertainty'], 3)} |"
            )
        if self.plots:
            lines += ["", *[f"![{name}]({path.name})" for name, path in self.plots.items()]]
        return "\n".join(lines)

    def as_json(self) -> dict[str, Any]:
        """Summary, quartiles and correlations as plain data."""
        return {
            "summary": self.summary.to_dicts(),
            "quartiles": self.quartiles.to_dicts(),
            "correlations": self.correlations,
            "plots": {name: str(path) for name, path in self.plots.items()},
            "markdown": self.markdown(),
        }


def _fmt(value: Any, digits: int = 2) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "–"
    return f"{value:.{digits}f}"


def analyse_grounding(predictions: pl.DataFrame, output_dir: str | Path | None = None) -> GroundingResult:
    """Run the whole analysis; with ``output_dir``, also write ``boxes.parquet``, the tables and the two PNG plots."""
    boxes = box_table(predictions)
    quartiles = entropy_quartiles(boxes)
    summary = model_summary(predictions, boxes)
    correlations = entropy_iou_correlation(boxes)
    result = GroundingResult(boxes, quartiles, summary, correlations)
    if output_dir is not None:
        folder = Path(output_dir)
        folder.mkdir(parents=True, exist_ok=True)
        boxes.write_parquet(folder / "boxes.parquet")
        quartiles.write_csv(folder / "iou_by_entropy_quartile.csv")
        summary.write_csv(folder / "accuracy_and_uncertainty.csv")
        result.plots = {
            "figure4_iou_by_entropy_quartile": plot_iou_by_quartile(
                quartiles, folder / "figure4_iou_by_entropy_quartile.png"
            ),
            "figure5_accuracy_and_uncertainty": plot_accuracy_and_uncertainty(
                summary, folder / "figure5_accuracy_and_uncertainty.png"
            ),
        }
    return result
