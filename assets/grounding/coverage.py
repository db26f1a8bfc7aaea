"""Coverage and quality of the pseudo-GT, counted as SpatialCORE's appendix A.3 reports them.

The paper traces the construction over OmniSpatial's training split: of the samples whose task type
has box-localisable objects (5,643), phrase extraction yields queries for some (4,063), and of those
some receive at least one valid box above the 0.3 threshold (4,007): 71.0% of the localisable samples
and 98.6% of the queried ones. :func:`coverage_counts` computes the same figures (overall and per
task type); :func:`validity_histogram` and :func:`gallery_image` show what the boxes look like.

>>> import polars as pl
>>> phrases = pl.DataFrame({"question_id": ["a", "b", "c"], "task_type": ["T", "T", "U"],
...                         "skipped": [False, False, True], "phrases": [["cup"], [], []]})
>>> boxes = pl.DataFrame({"question_id": ["a"], "pseudo_gt": [[{"bbox_2d": [1, 2, 3, 4], "label": "cup",
...                                                             "validity": 0.8}]]})
>>> report = coverage_counts(phrases, boxes)
>>> report.localizable, report.with_queries, report.with_valid_box, report.coverage_of_localizable
(2, 1, 1, 0.5)
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field

import numpy as np
import polars as pl
from PIL import Image

from assets.previews import draw_boxes, gallery

HISTOGRAM_EDGES = tuple(round(0.1 * index, 1) for index in range(11))


@dataclass
class CoverageReport:
    """Appendix-A.3 counts: samples, skipped, localisable, with queries, with at least one valid box."""

    samples: int = 0
    skipped: int = 0
    localizable: int = 0
    with_queries: int = 0
    with_valid_box: int = 0
    boxes: int = 0
    by_task_type: dict[str, dict[str, int]] = field(default_factory=dict)

    @property
    def coverage_of_localizable(self) -> float:
        """Share of localisable samples with at least one valid box (the paper's 71.0%)."""
        return self.with_valid_box / self.localizable if self.localizable else 0.0

    @property
    def coverage_of_queried(self) -> float:
        """Share of samples with queries that got at least one valid box (the paper's 98.6%)."""
        return self.with_valid_box / self.with_queries if self.with_queries else 0.0

    def as_dict(self) -> dict:
        """Plain values (counts, shares rounded to 4 places, per-task-type counts)."""
        values = asdict(self)
        values["coverage_of_localizable"] = round(self.coverage_of_localizable, 4)
        values["coverage_of_queried"] = round(self.coverage_of_queried, 4)
        return values

    def markdown(self) -> str:
        """The counts as a Markdown table, overall then per task type."""
        lines = [
            "| task type | samples | localisable | with queries | with a valid box | of localisable | of queried |",
            "|---|---|---|---|---|---|---|",
        ]

        def row(name: str, counts: dict[str, int]) -> str:
            localizable, queried, boxed = (
                counts["localizable"],
                counts["with_queries"],
                counts["with_valid_box"],
            )
            of_localizable = f"{boxed / localizable:.1%}" if localizable else "-"
            of_queried = f"{boxed / queried:.1%}" if queried else "-"
            return f"| {name} | {counts['samples']} | {localizable} | {queried} | {boxed} | {of_localizable} | {of_queried} |"

        lines.append(
            row(
                "**all**",
                {
                    "samples": self.samples,
                    "localizable": self.localizable,
                    "with_queries": self.with_queries,
                    "with_valid_box": self.with_valid_box,
                },
            )
        )
        lines.extend(row(name, counts) for name, counts in sorted(self.by_task_type.items()))
        return "\n".join(lines)


def coverage_counts(object_phrases: pl.DataFrame, pseudo_gt_boxes: pl.DataFrame) -> CoverageReport:
    """Coverage of the pseudo-GT over the questions of ``object_phrases``.

    Args:
        object_phrases (`pl.DataFrame`): `question_id`, `task_type`, `skipped`, `phrases`.
        pseudo_gt_boxes (`pl.DataFrame`): `question_id`, `pseudo_gt` (questions absent here have no box).

    Returns:
        [`CoverageReport`]
    """
    boxes = pseudo_gt_boxes.select("question_id", pl.col("pseudo_gt").list.len().alias("num_boxes"))
    joined = (
        object_phrases.select(
            "question_id", "task_type", "skipped", pl.col("phrases").list.len().alias("num_phrases")
        )
        .join(boxes, on="question_id", how="left")
        .with_columns(pl.col("num_boxes").fill_null(0))
        .with_columns(
            (~pl.col("skipped")).alias("localizable"),
            ((~pl.col("skipped")) & (pl.col("num_phrases") > 0)).alias("with_queries"),
            ((~pl.col("skipped")) & (pl.col("num_phrases") > 0) & (pl.col("num_boxes") > 0)).alias(
                "with_valid_box"
            ),
        )
    )
    report = CoverageReport(
        samples=joined.height,
        skipped=int(joined["skipped"].sum()),
        localizable=int(joined["localizable"].sum()),
        with_queries=int(joined["with_queries"].sum()),
        with_valid_box=int(joined["with_valid_box"].sum()),
        boxes=int(joined.filter(pl.col("with_queries"))["num_boxes"].sum()),
    )
    if joined.height:
        per_type = joined.group_by("task_type").agg(
            pl.len().alias("samples"),
            pl.col("localizable").sum(),
            pl.col("with_queries").sum(),
            pl.col("with_valid_box").sum(),
        )
        report.by_task_type = {
            str(row["task_type"]): {
                name: int(row[name]) for name in ("samples", "localizable", "with_queries", "with_valid_box")
            }
            for row in per_type.iter_rows(named=True)
        }
    return report


def validity_values(pseudo_gt: pl.Series | pl.DataFrame) -> np.ndarray:
    """All validities of a `pseudo_gt` column (or of a frame that has one).

    Example:
        >>> validity_values(pl.Series([[{"bbox_2d": [0, 0, 1, 1], "label": "a", "validity": 0.5}], []])).tolist()
        [0.5]
    """
    column = pseudo_gt["pseudo_gt"] if isinstance(pseudo_gt, pl.DataFrame) else pseudo_gt
    values = (
        column.explode(empty_as_null=True).drop_nulls().struct.field("validity")
        if column.len()
        else pl.Series([], dtype=pl.Float64)
    )
    return values.to_numpy().astype(np.float64)


def validity_histogram(
    values: Sequence[float] | np.ndarray, edges: Sequence[float] = HISTOGRAM_EDGES
) -> dict[str, int]:
    """Counts of validities per bin `[low, high)` (the last bin includes 1.0).

    Example:
        >>> validity_histogram([0.35, 0.31, 0.95, 1.0], edges=(0.3, 0.5, 1.0))
        {'0.30-0.50': 2, '0.50-1.00': 2}
    """
    counts, _ = np.histogram(np.asarray(values, dtype=np.float64), bins=np.asarray(edges, dtype=np.float64))
    return {
        f"{low:.2f}-{high:.2f}": int(count)
        for low, high, count in zip(edges[:-1], edges[1:], counts, strict=False)
    }


def histogram_image(histogram: dict[str, int], title: str = "pseudo-GT validity") -> Image.Image:
    """A bar chart of a validity histogram (PNG-ready PIL image)."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    figure, axis = plt.subplots(figsize=(5, 2.6), dpi=100)
    labels = list(histogram)
    axis.bar(range(len(labels)), [histogram[label] for label in labels], color="#4363d8")
    axis.set_xticks(range(len(labels)), labels, rotation=45, ha="right", fontsize=7)
    axis.set_ylabel("boxes")
    axis.set_title(title, fontsize=9)
    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")
    plt.close(figure)
    buffer.seek(0)
    return Image.open(buffer).convert("RGB")


def gallery_image(frame: pl.DataFrame, count: int = 6, seed: int = 0) -> Image.Image | None:
    """Previews of up to ``count`` random rows that have boxes, boxes and labels drawn (None if none has).

    Args:
        frame (`pl.DataFrame`): rows with `image` and `pseudo_gt`.
        count (`int`): how many previews.
        seed (`int`): seed of the choice.
    """
    with_boxes = frame.filter(pl.col("pseudo_gt").list.len() > 0)
    if with_boxes.height == 0:
        return None
    chosen = (
        with_boxes.sample(n=min(count, with_boxes.height), seed=seed)
        if with_boxes.height > count
        else with_boxes
    )
    images = []
    for row in chosen.iter_rows(named=True):
        labels = [f"{item['label']} {item['validity']:.2f}" for item in row["pseudo_gt"]]
        images.append(draw_boxes(row["image"], [item["bbox_2d"] for item in row["pseudo_gt"]], labels))
    return gallery(images)
