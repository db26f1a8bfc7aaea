"""Reports in the papers' own layouts, with the published rows shipped as data and shown alongside.

Tables (values are accuracies in percent):

* **SpatialCORE Table 1** (OmniSpatial): the average over all original items (weighted by category
  size, as the paper) and the 10 sub-task types under their four dimensions.
* **SpatialCORE Table 2** (SpatiaLab): the weighted average and the 6 categories.
* **SpatialThinker spatial VQA table**: 3DSRBench (CircularEval as 3DSRBench's own scoring computes
  it: a flipped question is a question of its own), CV-Bench 2D (mean of the ADE20K and COCO
  accuracies, as CV-Bench defines it), 3D (Omni3D) and their mean, BLINK relation and depth and their
  mean.
* **3DSRBench**: vanilla accuracy (every row on its own), CircularEval, FlipEval, and CircularEval by
  3DSRBench's four question types.
* Per benchmark: accuracy per category with item counts, the unparseable / truncated / failed
  counts, and the grouped metrics (CircularEval, FlipEval) where the data has the variants.

Every table carries a **Failed** column for the evaluated runs: answers whose request failed are
scored 0, and the count says how many of the run's answers behind the row that was. The console
lines of ``spatial-eval`` (:func:`console_lines`) print the same headline numbers as the tables.

Written as Markdown (``report.md``), CSV in long form (``report.csv``: table, section, method,
column, value, n) and JSON (``report.json``).

>>> normalize_category("Motion_Analysis"), normalize_category("Depth & Occlusion")
('motionanalysis', 'depthocclusion')
"""

from __future__ import annotations

import csv
import json
import logging
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, cast

import polars as pl

from training.eval.scoring import (
    accuracy_summary,
    circular_scores,
    flip_scores,
    has_circular_variants,
    has_flip_variants,
)

logger = logging.getLogger(__name__)

_NON_ALPHANUMERIC = re.compile(r"[^a-z0-9]+")
THIS_RUN_SECTION = "Evaluated runs"
THREEDSR = "3dsrbench"
METRIC_LABELS = {"overall": "accuracy", "circular_eval": "CircularEval", "flip_eval": "FlipEval"}


def normalize_category(name: str) -> str:
    """Lower-case letters and digits only, so that ``Motion_Analysis`` and ``motion analysis`` agree."""
    return _NON_ALPHANUMERIC.sub("", str(name).lower())


@dataclass(frozen=True)
class Column:
    """A table column: its key (CSV and JSON), header, the group it sits under, and the category names it covers."""

    key: str
    header: str
    group: str = ""
    categories: tuple[str, ...] = ()


@dataclass
class TableRow:
    """One row: a method (a published model or an evaluated run), its values and item counts per column.

    ``failed`` of ``answers`` is how many of the evaluated run's answers behind the row had no
    completion (a failed request, scored 0); published rows have neither.
    """

    section: str
    method: str
    values: dict[str, float | None]
    counts: dict[str, int] = field(default_factory=dict)
    published: bool = False
    failed: int = 0
    answers: int = 0


@dataclass
class ReportTable:
    """A rendered table: title, columns, rows (published first), and a note on how values were computed."""

    key: str
    title: str
    columns: list[Column]
    rows: list[TableRow]
    note: str = ""


@dataclass(frozen=True)
class TableLayout:
    """How one paper table is laid out and how a run's scores fill it."""

    key: str
    title: str
    published_file: str | None
    columns: tuple[Column, ...]
    benchmarks: tuple[str, ...]
    fill: Callable[[pl.DataFrame, tuple[Column, ...]], tuple[dict[str, float | None], dict[str, int]]]
    note: str = ""


def _originals(scores: pl.DataFrame) -> pl.DataFrame:
    return scores.filter((pl.col("circular_index") == 0) & ~pl.col("flipped"))


def _mean_percent(frame: pl.DataFrame) -> float | None:
    return float(cast(float, frame["score"].mean()) * 100.0) if frame.height else None  # a float column


def fill_by_category(
    scores: pl.DataFrame, columns: tuple[Column, ...]
) -> tuple[dict[str, float | None], dict[str, int]]:
    """Category columns plus ``average``, the mean over all items (the sample-weighted average of categories).

    >>> frame = pl.DataFrame({"category": ["A", "A", "B"], "score": [1.0, 0.0, 1.0],
    ...                       "circular_index": [0, 0, 0], "flipped": [False] * 3})
    >>> fill_by_category(frame, (Column("average", "Average"), Column("a", "A", categories=("a",)),
    ...                          Column("b", "B", categories=("b",))))
    ({'average': 66.66666666666666, 'a': 50.0, 'b': 100.0}, {'average': 3, 'a': 2, 'b': 1})
    """
    originals = _originals(scores).with_columns(
        pl.col("category").map_elements(normalize_category, return_dtype=pl.String).alias("_category")
    )
    values: dict[str, float | None] = {}
    counts: dict[str, int] = {}
    for column in columns:
        subset = (
            originals
            if column.key == "average"
            else originals.filter(pl.col("_category").is_in(list(column.categories)))
        )
        values[column.key] = _mean_percent(subset)
        counts[column.key] = subset.height
    return values, counts


def _accuracy_where(frame: pl.DataFrame, condition: pl.Expr) -> tuple[float | None, int]:
    subset = frame.filter(condition)
    return _mean_percent(subset), subset.height


def _mean_of(values: Sequence[float | None]) -> float | None:
    present = [value for value in values if value is not None]
    return sum(present) / len(present) if present else None


def fill_spatialthinker(
    scores: pl.DataFrame, columns: tuple[Column, ...]
) -> tuple[dict[str, float | None], dict[str, int]]:
    """The SpatialThinker spatial VQA columns from 3DSRBench, CV-Bench and BLINK scores."""
    values: dict[str, float | None] = {}
    counts: dict[str, int] = {}
    grouped = circular_scores(scores.filter(pl.col("benchmark") == THREEDSR))
    values["3dsrbench"], counts["3dsrbench"] = _mean_percent(grouped), grouped.height
    cvbench = _originals(scores.filter(pl.col("benchmark") == "cvbench"))
    source = pl.col("source").str.to_lowercase()
    ade, n_ade = _accuracy_where(cvbench, source.str.contains("ade"))
    coco, n_coco = _accuracy_where(cvbench, source.str.contains("coco"))
    other_2d, n_other = _accuracy_where(
        cvbench, (pl.col("task_type") == "2D") & ~source.str.contains("ade") & ~source.str.contains("coco")
    )
    values["cvbench_2d"] = _mean_of([ade, coco, other_2d])
    counts["cvbench_2d"] = n_ade + n_coco + n_other
    values["cvbench_3d"], counts["cvbench_3d"] = _accuracy_where(cvbench, pl.col("task_type") == "3D")
    values["cvbench_avg"] = _mean_of([values["cvbench_2d"], values["cvbench_3d"]])
    counts["cvbench_avg"] = cvbench.height
    blink = _originals(scores.filter(pl.col("benchmark") == "blink"))
    category = pl.col("category").map_elements(normalize_category, return_dtype=pl.String)
    values["blink_relation"], counts["blink_relation"] = _accuracy_where(blink, category == "spatialrelation")
    values["blink_depth"], counts["blink_depth"] = _accuracy_where(blink, category == "relativedepth")
    values["blink_avg"] = _mean_of([values["blink_relation"], values["blink_depth"]])
    counts["blink_avg"] = counts["blink_relation"] + counts["blink_depth"]
    return {column.key: values.get(column.key) for column in columns}, {
        column.key: counts.get(column.key, 0) for column in columns
    }


THREEDSR_TYPES = ("height", "location", "orientation", "multi_object")


def fill_3dsrbench(
    scores: pl.DataFrame, columns: tuple[Column, ...]
) -> tuple[dict[str, float | None], dict[str, int]]:
    """Vanilla accuracy (every row), CircularEval and FlipEval, and CircularEval per question type.

    >>> rows = {"benchmark": ["3dsrbench"] * 4, "question_key": ["q1", "q1", "q1", "q1"],
    ...         "flipped": [False, False, True, True], "circular_index": [0, 1, 0, 1],
    ...         "status": ["correct", "correct", "correct", "wrong"], "score": [1.0, 1.0, 1.0, 0.0],
    ...         "task_type": ["height"] * 4}
    >>> values, counts = fill_3dsrbench(pl.DataFrame(rows), THREEDSR_COLUMNS)
    >>> values["vanilla"], values["circular_eval"], values["flip_eval"], counts["circular_eval"]
    (75.0, 50.0, 0.0, 2)
    """
    frame = scores.filter(pl.col("benchmark") == THREEDSR)
    circular = circular_scores(frame)
    flip = flip_scores(frame)
    values: dict[str, float | None] = {
        "vanilla": _mean_percent(frame),
        "circular_eval": _mean_percent(circular),
        "flip_eval": _mean_percent(flip),
    }
    counts = {"vanilla": frame.height, "circular_eval": circular.height, "flip_eval": flip.height}
    for kind in THREEDSR_TYPES:
        subset = circular.filter(pl.col("task_type") == kind) if circular.height else circular
        values[kind], counts[kind] = _mean_percent(subset), subset.height
    return {column.key: values.get(column.key) for column in columns}, {
        column.key: counts.get(column.key, 0) for column in columns
    }


OMNISPATIAL_COLUMNS = (
    Column("average", "Average"),
    Column("manipulation", "Manipulation", "Dynamic Reasoning", ("manipulation", "manipulate")),
    Column("motion_analysis", "Motion Anal.", "Dynamic Reasoning", ("motionanalysis",)),
    Column("traffic_analysis", "Traffic Anal.", "Spatial Interaction", ("trafficanalysis",)),
    Column("localization", "Localization", "Spatial Interaction", ("localization", "localisation")),
    Column("geospatial_strategy", "Geospa. Strategy", "Spatial Interaction", ("geospatialstrategy",)),
    Column("pattern_recognition", "Pattern Rec.", "Complex Logic", ("patternrecognition",)),
    Column("geometric_reasoning", "Geometric Reasoning", "Complex Logic", ("geometricreasoning",)),
    Column("egocentric", "Ego Centric", "Perspective Taking", ("egocentric",)),
    Column("allocentric", "Allo Centric", "Perspective Taking", ("allocentric",)),
    Column("hypothetical", "Hypothetical", "Perspective Taking", ("hypothetical",)),
)
SPATIALAB_COLUMNS = (
    Column("average", "Average"),
    Column("3d_geometry", "3D Geom.", "Question Categories", ("3dgeometry",)),
    Column("depth_occlusion", "Dep. & Occu.", "Question Categories", ("depthocclusion",)),
    Column("orientation", "Orientation", "Question Categories", ("orientation",)),
    Column("relative_positioning", "Relat. Posit.", "Question Categories", ("relativepositioning",)),
    Column("size_scale", "Size & Scale", "Question Categories", ("sizescale",)),
    Column("spatial_navigation", "Spati. Navig.", "Question Categories", ("spatialnavigation",)),
)
SPATIALTHINKER_COLUMNS = (
    Column("3dsrbench", "3DSRBench", "3DSRBench"),
    Column("cvbench_2d", "2D", "CV-Bench"),
    Column("cvbench_3d", "3D", "CV-Bench"),
    Column("cvbench_avg", "Avg", "CV-Bench"),
    Column("blink_relation", "Rel", "BLINK"),
    Column("blink_depth", "Depth", "BLINK"),
    Column("blink_avg", "Avg", "BLINK"),
)

THREEDSR_COLUMNS = (
    Column("vanilla", "Vanilla", "All questions"),
    Column("circular_eval", "CircularEval", "All questions"),
    Column("flip_eval", "FlipEval", "All questions"),
    Column("height", "Height", "CircularEval by type"),
    Column("location", "Location", "CircularEval by type"),
    Column("orientation", "Orientation", "CircularEval by type"),
    Column("multi_object", "Multi-Object", "CircularEval by type"),
)

TABLE_LAYOUTS = (
    TableLayout(
        "spatialcore_table1",
        "SpatialCORE Table 1: OmniSpatial",
        "spatialcore_table1_omnispatial.csv",
        OMNISPATIAL_COLUMNS,
        ("omnispatial",),
        fill_by_category,
        "Average over all items (weighted by category size); evaluated rows count only the original items.",
    ),
    TableLayout(
        "spatialcore_table2",
        "SpatialCORE Table 2: SpatiaLab (zero-shot)",
        "spatialcore_table2_spatialab.csv",
        SPATIALAB_COLUMNS,
        ("spatialab",),
        fill_by_category,
        "Average over all items (weighted by category size).",
    ),
    TableLayout(
        "spatialthinker_spatial_vqa",
        "SpatialThinker: spatial VQA",
        "spatialthinker_spatial_vqa.csv",
        SPATIALTHINKER_COLUMNS,
        ("3dsrbench", "cvbench", "blink"),
        fill_spatialthinker,
        "3DSRBench: CircularEval as 3DSRBench's own scoring computes it (every rotation of a question right; a "
        "flipped question counts as a question of its own). CV-Bench 2D: mean of the ADE20K and COCO accuracies; "
        "Avg: mean of 2D and 3D. BLINK Avg: mean of Rel and Depth.",
    ),
    TableLayout(
        "3dsrbench",
        "3DSRBench: vanilla, CircularEval and FlipEval",
        None,
        THREEDSR_COLUMNS,
        (THREEDSR,),
        fill_3dsrbench,
        "Vanilla: every row (each rotation and flip) scored on its own. CircularEval: a question counts only if "
        "every rotation is right, and a flipped question is a question of its own (3DSRBench's scoring strips only "
        "the '-N' of the qid). FlipEval: a question counts only if every rotation of it and of its flipped "
        "counterpart is right. Item counts are rows for Vanilla, questions otherwise.",
    ),
)


def published_rows(file_name: str | None) -> list[TableRow]:
    """The published rows of a shipped CSV (``training/eval/published/<file_name>``); blanks are ``None``."""
    if file_name is None:
        return []
    text = resources.files("training.eval").joinpath("published", file_name).read_text(encoding="utf-8")
    rows = []
    for record in csv.DictReader(text.splitlines()):
        values = {
            key: (float(value) if value not in ("", None) else None)
            for key, value in record.items()
            if key not in ("section", "method")
        }
        rows.append(
            TableRow(section=record["section"], method=record["method"], values=values, published=True)
        )
    return rows


def build_paper_tables(scores: pl.DataFrame, include_empty: bool = False) -> list[ReportTable]:
    """The paper tables, published rows first, then one row per evaluated run that has items for the table.

    Args:
        scores (`pl.DataFrame`): scored predictions (``eval_report`` rows) of one or more runs.
        include_empty (`bool`, defaults to `False`): also return tables no run has items for.
    """
    tables = []
    runs = scores["run_name"].unique(maintain_order=True).to_list() if scores.height else []
    for layout in TABLE_LAYOUTS:
        rows = published_rows(layout.published_file)
        evaluated = 0
        for run in runs:
            run_scores = scores.filter(
                (pl.col("run_name") == run) & pl.col("benchmark").is_in(list(layout.benchmarks))
            )
            if run_scores.height == 0:
                continue
            values, counts = layout.fill(run_scores, layout.columns)
            failed = int((run_scores["status"] == "error").sum())
            rows.append(
                TableRow(THIS_RUN_SECTION, run, values, counts, failed=failed, answers=run_scores.height)
            )
            evaluated += 1
        if evaluated or include_empty:
            tables.append(ReportTable(layout.key, layout.title, list(layout.columns), rows, layout.note))
    return tables


def benchmark_summaries(scores: pl.DataFrame) -> dict[str, dict[str, dict[str, Any]]]:
    """Per run and benchmark: counts, accuracy, per-category accuracy, and the grouped metrics it defines.

    Returns:
        `dict`: ``{run: {benchmark: {...}}}`` with ``overall`` (the original items: no rotation, not
        flipped), ``all_variants`` (every row on its own: the vanilla accuracy), ``grouped``
        (``circular_eval`` and ``flip_eval`` where the data has the variants; always both for
        3DSRBench), ``headline`` (the metric the paper table shows: CircularEval for 3DSRBench,
        ``overall`` otherwise) and ``categories`` (per category, in the headline's unit). Every
        accuracy is in percent; each summary counts ``unparseable``, ``truncated`` and failed
        (``error``) answers or questions.
    """
    result: dict[str, dict[str, dict[str, Any]]] = {}
    if scores.height == 0:
        return result
    for (run, benchmark), frame in scores.group_by(["run_name", "benchmark"], maintain_order=True):
        grouped: dict[str, Any] = {}
        if benchmark == THREEDSR or has_circular_variants(frame):
            grouped["circular_eval"] = accuracy_summary(circular_scores(frame))
        if benchmark == THREEDSR or has_flip_variants(frame):
            grouped["flip_eval"] = accuracy_summary(flip_scores(frame))
        headline_metric = "circular_eval" if benchmark == THREEDSR else "overall"
        units = circular_scores(frame) if benchmark == THREEDSR else _originals(frame)
        categories = {
            str(name): accuracy_summary(group)
            for (name,), group in units.sort("category").group_by("category", maintain_order=True)
        }
        overall = accuracy_summary(_originals(frame))
        headline = grouped[headline_metric] if headline_metric in grouped else overall
        result.setdefault(str(run), {})[str(benchmark)] = {
            "overall": overall,
            "all_variants": accuracy_summary(frame),
            "categories": categories,
            "grouped": grouped,
            "headline": {"metric": headline_metric, **headline},
        }
    return result


def console_lines(report: Report, run: str) -> list[str]:
    """One line per benchmark of ``run``: the paper table's headline number, the other metrics, the counts.

    The headline is the value the paper table shows (CircularEval for 3DSRBench, the original items'
    accuracy otherwise), so the console and ``report.md`` agree.
    """
    lines = []
    for benchmark, summary in report.benchmarks.get(run, {}).items():
        headline = summary["headline"]
        unit = "questions" if headline["metric"] != "overall" else "items"
        parts = [
            f"{METRIC_LABELS[headline['metric']]} {_format(headline['accuracy'])}% on {headline['n']} {unit}"
        ]
        if summary["grouped"]:
            vanilla = summary["all_variants"]
            parts.append(f"vanilla {_format(vanilla['accuracy'])}% on {vanilla['n']} items")
            for name, values in summary["grouped"].items():
                if name != headline["metric"]:
                    parts.append(
                        f"{METRIC_LABELS[name]} {_format(values['accuracy'])}% on {values['n']} questions"
                    )
        answers = summary["all_variants"]
        lines.append(
            f"{run} {benchmark}: " + "; ".join(parts) + f" ({answers['unparseable']} unparseable, "
            f"{answers['truncated']} truncated, {answers['error']} failed of {answers['n']} answers)"
        )
    return lines


@dataclass
class Report:
    """Everything the report files hold."""

    runs: list[dict[str, Any]]
    tables: list[ReportTable]
    benchmarks: dict[str, dict[str, dict[str, Any]]]
    grounding: dict[str, Any] | None = None


def build_report(
    scores: pl.DataFrame, runs: Sequence[dict[str, Any]] = (), grounding: dict[str, Any] | None = None
) -> Report:
    """Assemble the paper tables and the per-benchmark summaries of scored predictions."""
    return Report(
        runs=list(runs),
        tables=build_paper_tables(scores),
        benchmarks=benchmark_summaries(scores),
        grounding=grounding,
    )


# --------------------------------------------------------------------------------------------------
# Rendering
# --------------------------------------------------------------------------------------------------


def _format(value: float | None) -> str:
    return "–" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.2f}"


def _failed_cell(row: TableRow) -> str:
    return "" if row.published else f"{row.failed} of {row.answers}"


def table_markdown(table: ReportTable) -> str:
    """A Markdown table with section rows, the published rows and the evaluated runs (item counts in brackets).

    The last column, **Failed**, counts the evaluated run's failed answers (scored 0) behind the row.
    """
    groups = []
    for column in table.columns:
        if column.group and column.group not in groups:
            groups.append(column.group)
    header = ["Method", *[column.header for column in table.columns], "Failed"]
    lines = [f"### {table.title}", ""]
    if groups:
        lines += [
            "Column groups: "
            + "; ".join(
                f"{group}: {', '.join(c.header for c in table.columns if c.group == group)}"
                for group in groups
            ),
            "",
        ]
    lines += [
        "| " + " | ".join(header) + " |",
        "|" + "|".join(["---"] + ["---:"] * (len(table.columns) + 1)) + "|",
    ]
    section = None
    for row in table.rows:
        if row.section != section:
            section = row.section
            lines.append(f"| *{section}* |" + " |" * (len(table.columns) + 1))
        cells = []
        for column in table.columns:
            value = _format(row.values.get(column.key))
            if not row.published and row.counts:
                value += f" ({row.counts.get(column.key, 0)})"
            cells.append(value)
        name = row.method if row.published else f"**{row.method}**"
        lines.append("| " + " | ".join([name, *cells, _failed_cell(row)]) + " |")
    if table.note:
        lines += ["", f"_{table.note} Evaluated rows show item counts in brackets._"]
    failing = [row for row in table.rows if row.failed]
    if failing:
        lines += [
            "",
            "**Failed requests:** "
            + "; ".join(f"{row.method}: {row.failed} of {row.answers} answers" for row in failing)
            + ". They are scored 0 above; rerun the same command to retry them (failures are not cached).",
        ]
    return "\n".join(lines)


def _summary_markdown(benchmarks: dict[str, dict[str, dict[str, Any]]]) -> str:
    lines = [
        "### Runs by benchmark",
        "",
        "Headline: the number the paper table shows. The other columns count answers (every row).",
        "",
        "| Run | Benchmark | Headline | Answers | Vanilla | Correct | Wrong | Unparseable | Truncated | Failed |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for run, per_benchmark in benchmarks.items():
        for benchmark, summary in per_benchmark.items():
            answers, headline = summary["all_variants"], summary["headline"]
            unit = "items" if headline["metric"] == "overall" else "questions"
            lines.append(
                f"| {run} | {benchmark} | {METRIC_LABELS[headline['metric']]} {_format(headline['accuracy'])} "
                f"({headline['n']} {unit}) | {answers['n']} | {_format(answers['accuracy'])} | {answers['correct']} | "
                f"{answers['wrong']} | {answers['unparseable']} | {answers['truncated']} | {answers['error']} |"
            )
    return "\n".join(lines)


def _category_markdown(run: str, benchmark: str, summary: dict[str, Any]) -> str:
    unit = "Questions" if summary["headline"]["metric"] != "overall" else "Items"
    label = METRIC_LABELS[summary["headline"]["metric"]]
    lines = [
        f"#### {run} on {benchmark}",
        "",
        f"Categories: {label} of the {unit.lower()} of each category.",
        "",
        f"| Category | {unit} | Accuracy | Unparseable | Truncated | Failed |",
        "|---|---:|---:|---:|---:|---:|",
    ]

    def line(name: str, values: dict[str, Any]) -> str:
        return (
            f"| {name} | {values['n']} | {_format(values['accuracy'])} | {values['unparseable']} | "
            f"{values['truncated']} | {values['error']} |"
        )

    for name, values in summary["categories"].items():
        lines.append(line(name or "(none)", values))
    if summary["headline"]["metric"] == "overall":
        # (3DSRBench's unflipped first rotations are not shown: their accuracy rewards a left/right bias)
        lines.append(line("**all original items**", summary["overall"]))
    if summary["grouped"]:
        lines.append(line("**vanilla (every row)**", summary["all_variants"]))
    for name, values in summary["grouped"].items():
        lines.append(line(f"**{METRIC_LABELS[name]}**", values))
    return "\n".join(lines)


def report_markdown(report: Report) -> str:
    """The whole report as Markdown."""
    parts = ["# Spatial reasoning evaluation", ""]
    if report.runs:
        parts += [
            "## Runs",
            "",
            "| Run | Model | Adapter | Backend | Format | Family |",
            "|---|---|---|---|---|---|",
        ]
        for run in report.runs:
            parts.append(
                f"| {run.get('run_name')} | {run.get('model')} | {run.get('adapter') or '–'} | {run.get('backend')} | "
                f"{run.get('prompt_format')} | {run.get('family')} |"
            )
        parts.append("")
    parts += ["## Paper tables", ""]
    for table in report.tables:
        parts += [table_markdown(table), ""]
    parts += ["## Benchmarks", "", _summary_markdown(report.benchmarks), ""]
    for run_name, per_benchmark in report.benchmarks.items():
        for benchmark, summary in per_benchmark.items():
            parts += [_category_markdown(run_name, benchmark, summary), ""]
    if report.grounding:
        parts += ["## Grounding analysis", "", report.grounding.get("markdown", ""), ""]
    return "\n".join(parts).rstrip() + "\n"


def report_csv_rows(report: Report) -> list[dict[str, Any]]:
    """Long-form rows ``(table, section, method, column, value, n)`` of every table and category summary."""
    rows = []
    for table in report.tables:
        for row in table.rows:
            for column in table.columns:
                rows.append(
                    {
                        "table": table.key,
                        "section": row.section,
                        "method": row.method,
                        "column": column.key,
                        "value": row.values.get(column.key),
                        "n": row.counts.get(column.key) if not row.published else None,
                    }
                )
            if not row.published:
                rows.append(
                    {
                        "table": table.key,
                        "section": row.section,
                        "method": row.method,
                        "column": "failed",
                        "value": float(row.failed),
                        "n": row.answers,
                    }
                )
    for run, per_benchmark in report.benchmarks.items():
        for benchmark, summary in per_benchmark.items():
            for name, values in summary["categories"].items():
                rows.append(
                    {
                        "table": f"benchmark:{benchmark}",
                        "section": THIS_RUN_SECTION,
                        "method": run,
                        "column": f"category:{name}",
                        "value": values["accuracy"],
                        "n": values["n"],
                    }
                )
            for key in ("overall", "all_variants", "headline"):
                rows.append(
                    {
                        "table": f"benchmark:{benchmark}",
                        "section": THIS_RUN_SECTION,
                        "method": run,
                        "column": key,
                        "value": summary[key]["accuracy"],
                        "n": summary[key]["n"],
                    }
                )
            for status in ("unparseable", "truncated", "error"):
                rows.append(
                    {
                        "table": f"benchmark:{benchmark}",
                        "section": THIS_RUN_SECTION,
                        "method": run,
                        "column": f"count:{status}",
                        "value": float(summary["all_variants"][status]),
                        "n": summary["all_variants"]["n"],
                    }
                )
            for name, values in summary["grouped"].items():
                rows.append(
                    {
                        "table": f"benchmark:{benchmark}",
                        "section": THIS_RUN_SECTION,
                        "method": run,
                        "column": name,
                        "value": values["accuracy"],
                        "n": values["n"],
                    }
                )
    return rows


def _json_safe(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(key): _json_safe(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(item) for item in value]
    return value


def report_json(report: Report) -> dict[str, Any]:
    """The report as plain JSON data (NaN becomes null)."""
    return _json_safe(
        {
            "runs": report.runs,
            "tables": [
                {
                    "key": table.key,
                    "title": table.title,
                    "note": table.note,
                    "columns": [{"key": c.key, "header": c.header, "group": c.group} for c in table.columns],
                    "rows": [
                        {
                            "section": r.section,
                            "method": r.method,
                            "published": r.published,
                            "values": r.values,
                            "counts": r.counts,
                            "failed": None if r.published else r.failed,
                            "answers": None if r.published else r.answers,
                        }
                        for r in table.rows
                    ],
                }
                for table in report.tables
            ],
            "benchmarks": report.benchmarks,
            "grounding": {key: value for key, value in (report.grounding or {}).items() if key != "markdown"}
            or None,
        }
    )


def write_report(report: Report, output_dir: str | Path) -> dict[str, Path]:
    """Write ``report.md``, ``report.csv`` and ``report.json`` into ``output_dir``; return their paths."""
    folder = Path(output_dir)
    folder.mkdir(parents=True, exist_ok=True)
    paths = {"markdown": folder / "report.md", "csv": folder / "report.csv", "json": folder / "report.json"}
    paths["markdown"].write_text(report_markdown(report), encoding="utf-8")
    with paths["csv"].open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=["table", "section", "method", "column", "value", "n"])
        writer.writeheader()
        for row in report_csv_rows(report):
            writer.writerow({key: ("" if value is None else value) for key, value in row.items()})
    paths["json"].write_text(json.dumps(report_json(report), indent=2, sort_keys=False), encoding="utf-8")
    logger.info("wrote the report to %s", folder)
    return paths
