"""Manual audit of the pseudo-GT: export random samples for review, import verdicts, precision per bin.

SpatialCORE's appendix A.3 audits 262 boxes from 200 random training samples, counts a box correct
when it localises the intended object, and reports precision per Grounding DINO confidence range with
95% intervals (its Figure 6: every box at confidence 0.70 or more was correct). The same loop here:

1. :func:`sample_audit` draws N random samples with boxes (seeded) and lists all their boxes, each with
   its confidence bin;
2. :func:`write_review_files` writes one picture per box (the box drawn and labelled) and a
   ``verdicts.csv`` with an empty ``correct`` column, keeping verdicts already entered for the same boxes;
3. a reviewer fills ``correct`` with 1/0 (yes/no, true/false, y/n, correct/wrong);
4. :func:`read_verdicts` and :func:`precision_by_bin` give precision per bin with Wilson intervals,
   and :func:`precision_plot` draws Figure 6.

>>> wilson_interval(251, 262)
(0.9264, 0.9764)
>>> confidence_bin(0.7, (0.3, 0.5, 0.7, 0.9, 1.0)), confidence_bin(1.0, (0.3, 0.5, 0.7, 0.9, 1.0))
('0.70-0.90', '0.90-1.00')
"""

from __future__ import annotations

import csv
import io
import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path

import polars as pl
from PIL import Image
from pydantic import BaseModel, Field

from assets.previews import PNG_COMPRESS_LEVEL, draw_boxes
from data_contracts.storage import atomic_write

logger = logging.getLogger(__name__)

DEFAULT_BIN_EDGES = (0.3, 0.5, 0.7, 0.9, 1.0)
"""Confidence ranges of the audit (the paper's errors all fell in the two ranges under 0.70)."""
VERDICTS_FILE = "verdicts.csv"
VERDICT_COLUMNS = (
    "audit_id",
    "question_id",
    "label",
    "validity",
    "confidence_bin",
    "image_file",
    "correct",
    "note",
)
TRUE_WORDS = frozenset({"1", "yes", "y", "true", "t", "correct", "ok"})
FALSE_WORDS = frozenset({"0", "no", "n", "false", "f", "wrong", "incorrect"})

AUDIT_COLUMNS: dict[str, pl.DataType | type[pl.DataType]] = {
    "audit_id": pl.String,
    "question_id": pl.String,
    "box_index": pl.Int64,
    "label": pl.String,
    "bbox_2d": pl.List(pl.Int64),
    "validity": pl.Float64,
    "confidence_bin": pl.String,
    "task_type": pl.String,
    "question": pl.String,
    "image": pl.Struct({"bytes": pl.Binary, "path": pl.String}),
}
PRECISION_COLUMNS = {
    "confidence_bin": pl.String,
    "bin_low": pl.Float64,
    "bin_high": pl.Float64,
    "audited": pl.Int64,
    "correct": pl.Int64,
    "precision": pl.Float64,
    "ci_low": pl.Float64,
    "ci_high": pl.Float64,
}


def confidence_bin(value: float, edges: Sequence[float] = DEFAULT_BIN_EDGES) -> str:
    """The label of the bin `[low, high)` holding ``value`` (the last bin includes its upper edge).

    Values under the first edge fall in `"<low"`; values above the last in the last bin.
    """
    if value < edges[0]:
        return f"<{edges[0]:.2f}"
    for low, high in pairwise(edges):
        if value < high:
            return f"{low:.2f}-{high:.2f}"
    return f"{edges[-2]:.2f}-{edges[-1]:.2f}"


def wilson_interval(successes: int, trials: int, z: float = 1.959964) -> tuple[float, float]:
    """Wilson score interval of a proportion (95% by default), rounded to 4 places; `(0, 1)` for no trials."""
    if trials == 0:
        return 0.0, 1.0
    share = successes / trials
    denominator = 1 + z * z / trials
    centre = (share + z * z / (2 * trials)) / denominator
    half = z * math.sqrt(share * (1 - share) / trials + z * z / (4 * trials * trials)) / denominator
    return round(max(0.0, centre - half), 4), round(min(1.0, centre + half), 4)


class ConfidenceBins(BaseModel):
    """The confidence bins of the audit (both audit run configs extend this model)."""

    bin_edges: list[float] = Field(default=list(DEFAULT_BIN_EDGES), description="Confidence bin edges.")


class AuditSettings(ConfidenceBins):
    """Which samples are audited (the ``pseudo_gt_audit`` run config extends this model)."""

    samples: int = Field(
        default=200,
        description="Random training samples whose boxes are audited, all when fewer (paper: 200).",
    )
    seed: int = Field(default=0, description="Seed of the draw.")


def audited_rows(frame: pl.DataFrame, settings: AuditSettings | None = None) -> pl.DataFrame:
    """The ``settings.samples`` random rows of ``frame`` that have pseudo-GT (all of them when fewer), by
    question id (the rows need no image: a table's rows can be sampled before their images are read)."""
    settings = settings or AuditSettings()
    with_boxes = frame.filter(pl.col("pseudo_gt").list.len() > 0).sort("question_id")
    if with_boxes.height > settings.samples:
        with_boxes = with_boxes.sample(n=settings.samples, seed=settings.seed).sort("question_id")
    return with_boxes


def sample_audit(frame: pl.DataFrame, settings: AuditSettings | None = None) -> pl.DataFrame:
    """All boxes of ``settings.samples`` random rows that have pseudo-GT, one row per box.

    Args:
        frame (`pl.DataFrame`): `spatialcore_train`-like rows (`question_id`, `image`, `task_type`,
            `question`, `pseudo_gt`); the image only of the rows :func:`audited_rows` chooses is needed.
        settings (`AuditSettings`, *optional*): samples, seed and bin edges (200, 0, the defaults).

    Returns:
        `pl.DataFrame`: columns :data:`AUDIT_COLUMNS`, ordered by question and box.
    """
    settings = settings or AuditSettings()
    with_boxes = audited_rows(frame, settings)
    rows = []
    for row in with_boxes.iter_rows(named=True):
        for index, item in enumerate(row["pseudo_gt"]):
            rows.append(
                {
                    "audit_id": f"{row['question_id']}#{index}",
                    "question_id": row["question_id"],
                    "box_index": index,
                    "label": item["label"],
                    "bbox_2d": list(item["bbox_2d"]),
                    "validity": float(item["validity"]),
                    "confidence_bin": confidence_bin(float(item["validity"]), settings.bin_edges),
                    "task_type": row["task_type"],
                    "question": row["question"],
                    "image": row["image"],
                }
            )
    return pl.DataFrame(rows, schema=AUDIT_COLUMNS)


def _file_name(audit_id: str) -> str:
    return (
        "".join(character if character.isalnum() or character in "-_." else "_" for character in audit_id)
        + ".png"
    )


def _read_existing(path: Path) -> dict[str, dict[str, str]]:
    if not path.is_file():
        return {}
    with path.open(newline="", encoding="utf-8") as handle:
        return {row["audit_id"]: row for row in csv.DictReader(handle) if row.get("audit_id")}


def write_review_files(audit: pl.DataFrame, folder: str | Path) -> Path:
    """Write the review pictures and ``verdicts.csv`` (keeping verdicts already entered); return the CSV path.

    Each picture shows the image with the audited box drawn and labelled with its phrase and
    confidence; the question is in the CSV beside it.
    """
    target = Path(folder)
    (target / "images").mkdir(parents=True, exist_ok=True)
    verdicts_path = target / VERDICTS_FILE
    existing = _read_existing(verdicts_path)
    kept = 0
    rows = []
    for row in audit.iter_rows(named=True):
        name = _file_name(row["audit_id"])
        picture = draw_boxes(
            row["image"], [row["bbox_2d"]], [f"{row['label']} {row['validity']:.2f}"], max_side=640
        )
        with atomic_write(target / "images" / name) as handle:
            picture.save(handle, format="PNG", compress_level=PNG_COMPRESS_LEVEL)
        previous = existing.get(row["audit_id"], {})
        kept += bool(previous.get("correct"))
        rows.append(
            {
                "audit_id": row["audit_id"],
                "question_id": row["question_id"],
                "label": row["label"],
                "validity": f"{row['validity']:.4f}",
                "confidence_bin": row["confidence_bin"],
                "image_file": f"images/{name}",
                "correct": previous.get("correct", ""),
                "note": previous.get("note", ""),
            }
        )
    text = io.StringIO(newline="")
    writer = csv.DictWriter(text, fieldnames=list(VERDICT_COLUMNS))
    writer.writeheader()
    writer.writerows(rows)
    with atomic_write(verdicts_path) as handle:
        handle.write(text.getvalue().encode("utf-8"))
    logger.info(
        "audit: %d boxes to review in %s (%d verdicts kept from before)", len(rows), verdicts_path, kept
    )
    return verdicts_path


@dataclass
class Verdicts:
    """Verdicts read from a review file: `audit_id -> correct`, rows not reviewed, and unreadable rows."""

    correct: dict[str, bool] = field(default_factory=dict)
    unreviewed: int = 0
    problems: list[tuple[str, str]] = field(default_factory=list)


def read_verdicts(path: str | Path) -> Verdicts:
    """Read a filled ``verdicts.csv``.

    Blank ``correct`` cells are not reviewed yet; cells that are not a yes/no word are problems
    (`(audit_id, reason)`), never silently counted.

    Raises:
        `FileNotFoundError`: when the file does not exist.
        `ValueError`: when it lacks the `audit_id` or `correct` column.
    """
    file_path = Path(path)
    text = file_path.read_text(encoding="utf-8-sig")
    reader = csv.DictReader(io.StringIO(text))
    if not reader.fieldnames or not {"audit_id", "correct"} <= set(reader.fieldnames):
        raise ValueError(f"{file_path} needs the columns audit_id and correct (found {reader.fieldnames})")
    verdicts = Verdicts()
    for line, row in enumerate(reader, start=2):
        audit_id = (row.get("audit_id") or "").strip()
        value = (row.get("correct") or "").strip().lower()
        if not audit_id:
            verdicts.problems.append((f"line {line}", "no audit_id"))
        elif not value:
            verdicts.unreviewed += 1
        elif value in TRUE_WORDS:
            verdicts.correct[audit_id] = True
        elif value in FALSE_WORDS:
            verdicts.correct[audit_id] = False
        else:
            verdicts.problems.append((audit_id, f"line {line}: correct={row.get('correct')!r} is not yes/no"))
    return verdicts


def precision_by_bin(
    audit: pl.DataFrame, verdicts: Verdicts, edges: Sequence[float] = DEFAULT_BIN_EDGES
) -> tuple[pl.DataFrame, list[str]]:
    """Precision per confidence bin (and overall, bin `"all"`) with 95% Wilson intervals.

    Args:
        audit (`pl.DataFrame`): the exported boxes (`audit_id`, `validity`).
        verdicts (`Verdicts`): the reviewer's verdicts.
        edges (`Sequence[float]`): bin edges.

    Returns:
        `tuple[pl.DataFrame, list[str]]`: columns :data:`PRECISION_COLUMNS`, one row per bin then `"all"`;
        and the audit ids that have a verdict but are not in the export (stale verdicts, ignored).

    Example:
        >>> audit = pl.DataFrame({"audit_id": ["a", "b", "c"], "validity": [0.35, 0.95, 0.92]})
        >>> table, _ = precision_by_bin(audit, Verdicts(correct={"a": False, "b": True, "c": True}))
        >>> table.select("confidence_bin", "audited", "correct", "precision").rows()[-2:]
        [('0.90-1.00', 2, 2, 1.0), ('all', 3, 2, 0.6667)]
    """
    known = set(audit["audit_id"].to_list())
    stale = sorted(set(verdicts.correct) - known)
    bins = [(f"{low:.2f}-{high:.2f}", low, high) for low, high in pairwise(edges)]
    tallies = {name: [0, 0] for name, _, _ in bins}
    total = [0, 0]
    for audit_id, validity in audit.select("audit_id", "validity").iter_rows():
        if audit_id not in verdicts.correct:
            continue
        name = confidence_bin(validity, edges)
        tally = tallies.setdefault(name, [0, 0])
        tally[0] += 1
        tally[1] += int(verdicts.correct[audit_id])
        total[0] += 1
        total[1] += int(verdicts.correct[audit_id])
    rows = []
    bounds = {name: (low, high) for name, low, high in bins}
    for name, (audited, correct) in tallies.items():
        low, high = bounds.get(name, (0.0, edges[0]))
        rows.append(_precision_row(name, low, high, audited, correct))
    rows.append(_precision_row("all", edges[0], edges[-1], total[0], total[1]))
    return pl.DataFrame(rows, schema=PRECISION_COLUMNS), stale


def _precision_row(name: str, low: float, high: float, audited: int, correct: int) -> dict:
    ci_low, ci_high = wilson_interval(correct, audited)
    return {
        "confidence_bin": name,
        "bin_low": float(low),
        "bin_high": float(high),
        "audited": audited,
        "correct": correct,
        "precision": round(correct / audited, 4) if audited else None,
        "ci_low": ci_low,
        "ci_high": ci_high,
    }


def precision_plot(table: pl.DataFrame) -> Image.Image:
    """Figure 6: precision per confidence bin with 95% whiskers, box counts, and overall precision dashed."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    bins = table.filter((pl.col("confidence_bin") != "all") & (pl.col("audited") > 0))
    overall = table.filter(pl.col("confidence_bin") == "all")
    figure, axis = plt.subplots(figsize=(5, 3), dpi=100)
    positions = list(range(bins.height))
    precision = bins["precision"].to_list()
    lower = [p - low for p, low in zip(precision, bins["ci_low"].to_list(), strict=False)]
    upper = [high - p for p, high in zip(precision, bins["ci_high"].to_list(), strict=False)]
    axis.errorbar(positions, precision, yerr=[lower, upper], fmt="o", color="#4363d8", capsize=4)
    for position, value, count in zip(positions, precision, bins["audited"].to_list(), strict=False):
        axis.annotate(
            f"n={count}", (position, value), textcoords="offset points", xytext=(6, -12), fontsize=7
        )
    if overall.height and overall["precision"][0] is not None:
        axis.axhline(overall["precision"][0], linestyle="--", color="gray", linewidth=1)
    axis.set_xticks(positions, bins["confidence_bin"].to_list(), fontsize=8)
    axis.set_xlabel("detector confidence (validity)")
    axis.set_ylabel("precision")
    axis.set_ylim(0.0, 1.05)
    axis.set_title("pseudo-GT audit", fontsize=9)
    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")
    plt.close(figure)
    buffer.seek(0)
    return Image.open(buffer).convert("RGB")
