"""How a built table was made, read from the storage root alone (no Dagster instance needed).

Everything the card says about a build comes from files the graph wrote: the footers of the table and of
the tables it is built from (contract, code and data versions, source fingerprints), the settings those
tables record in their columns (backends, models, prompt versions, the Grounding DINO checkpoint and
thresholds, the pass@2 judge), their ``*_quarantine`` tables (counts and the commonest reasons) and the LLM
response cache (requests and cost per model and prompt version). Local paths are reduced to file names.

>>> without_local_paths("missing image: /data/OmniSpatial/Complex_Logic/12.png")
'missing image: 12.png'
>>> without_local_paths("coco:/tmp/w/instances.json and https://example.org/a/b")
'coco:instances.json and https://example.org/a/b'
"""

from __future__ import annotations

import logging
import re
import sqlite3
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from data_contracts.parquet_files import read_file_metadata
from data_contracts.storage import MissingTableError, llm_cache_path, table_files
from publishing.tables import LocalTable, iter_row_groups, publishable

logger = logging.getLogger(__name__)

_LOCAL_PATH = re.compile(r"(?<![\w/])/(?:[^\s/:;,'\"()\[\]]+/)+([^\s/:;,'\"()\[\]]+)")


def without_local_paths(text: str) -> str:
    """``text`` with every absolute path replaced by its last part (``coco:/a/b.json`` -> ``coco:b.json``)."""
    return _LOCAL_PATH.sub(lambda match: match.group(1), text)


@dataclass(frozen=True)
class QuarantineCount:
    """Records one stage of the build quarantined, with its commonest reasons."""

    stage: str
    count: int
    reasons: tuple[tuple[str, int], ...]


@dataclass(frozen=True)
class LlmUse:
    """Requests a build sent to one model with one prompt version, and their cost."""

    provider: str
    model: str
    prompt: str
    requests: int
    cost_usd: float


@dataclass
class TableFacts:
    """What the card says about one published table."""

    name: str
    local: LocalTable
    values: dict[str, dict[str, int]]
    """Rows per distinct value of ``origin``, ``source``, ``benchmark`` and ``task_type``/``category``."""
    settings: list[str] = field(default_factory=list)
    stage_versions: dict[str, dict[str, str]] = field(default_factory=dict)
    quarantine: list[QuarantineCount] = field(default_factory=list)


def column_counts(files, columns: list[str]) -> dict[str, dict[str, int]]:
    """Rows per distinct value of each of ``columns`` that the files have, read row group by row group."""
    counts: dict[str, Counter] = {}
    for path in files:
        present = [column for column in columns if column in pl.read_parquet_schema(path)]
        for frame in iter_row_groups([path], present):
            for column in present:
                counts.setdefault(column, Counter()).update(
                    str(value) for value in frame[column].to_list() if value is not None
                )
    return {column: dict(counter.most_common()) for column, counter in counts.items()}


def _files(root: Path, table: str) -> list[Path]:
    try:
        return table_files(root, table)
    except MissingTableError:
        return []


def distinct_values(root: Path, table: str, columns: list[str]) -> list[dict]:
    """The distinct rows of ``columns`` of built ``table`` (empty when it is not built or lacks them)."""
    files = _files(root, table)
    if not files or not all(column in pl.read_parquet_schema(files[0]) for column in columns):
        return []
    frames = [frame.unique() for frame in iter_row_groups(files, columns)]
    return pl.concat(frames).unique().sort(columns).to_dicts() if frames else []


def quarantine_counts(root: Path, stage: str, shown: int = 3) -> QuarantineCount | None:
    """Records quarantined by ``stage`` (its ``<stage>_quarantine`` table), None when it has none."""
    files = _files(root, f"{stage}_quarantine")
    if not files:
        return None
    reasons: Counter = Counter()
    for frame in iter_row_groups(files, ["reason"]):
        reasons.update(without_local_paths(str(reason)) for reason in frame["reason"].to_list())
    return QuarantineCount(stage, sum(reasons.values()), tuple(reasons.most_common(shown)))


def llm_uses(root: Path) -> list[LlmUse]:
    """Requests and cost per provider, model and prompt version recorded in the build's LLM response cache."""
    path = llm_cache_path(root)
    if not path.is_file():
        return []
    connection = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        rows = connection.execute(
            "SELECT provider, model, template_name || '@' || template_version, COUNT(*), SUM(cost_usd) "
            "FROM responses GROUP BY 1, 2, 3 ORDER BY 1, 2, 3"
        ).fetchall()
    except sqlite3.OperationalError as error:  # a cache written before the table existed
        logger.warning("LLM response cache %s unreadable: %s", path, error)
        return []
    finally:
        connection.close()
    return [LlmUse(*row) for row in rows]


def _settings(root: Path, name: str) -> list[str]:
    lines = []
    if name == "stvqa":
        for row in distinct_values(root, "stvqa_candidates", ["generator", "prompt_version"]):
            lines.append(f"Questions generated by `{row['generator']}` (prompt `{row['prompt_version']}`).")
        for row in distinct_values(root, "stvqa_validated", ["pass_at_2_backend", "pass_at_2_model"]):
            lines.append(
                f"Kept by pass@2: `{row['pass_at_2_backend']}` (`{row['pass_at_2_model']}`) answers each "
                "candidate; a question is kept when one of its two tries is right."
            )
        lines.append(
            "Balanced to 50% relation questions, split 90/10 by image, options shuffled by a stable hash."
        )
    if name in ("spatialcore_train", "sft_cold_start"):
        for row in distinct_values(root, "object_phrases", ["backend"]):
            lines.append(f"Object phrases extracted by `{row['backend']}`.")
        columns = ["backend", "detector", "box_threshold", "text_threshold"]
        for row in distinct_values(root, "pseudo_gt_boxes", columns):
            lines.append(
                f"Pseudo-GT boxes: backend `{row['backend']}`, checkpoint `{without_local_paths(row['detector'])}`, "
                f"box_threshold {row['box_threshold']}, text_threshold {row['text_threshold']}."
            )
    if name == "sft_cold_start":
        for row in distinct_values(root, "sft_cold_start", ["reasoning_backend", "model_family"]):
            lines.append(
                f"Reasoning traces by `{row['reasoning_backend']}`, boxes in the `{row['model_family']}` convention."
            )
    if name == "dge_tasks":
        versions = _stage_versions(root, ("scene_geometry", "frame_visibility", "dge_tasks"))
        lines.append(
            "DGE code versions: "
            + ", ".join(f"`{stage}` {v.get('code_version', 'not recorded')}" for stage, v in versions.items())
            + "."
        )
        for row in distinct_values(root, "dge_tasks", ["geometry_source"]):
            lines.append(
                f"Answers computed from `{row['geometry_source']}` geometry (per-scan point clouds and boxes)."
            )
    return lines


def _stage_versions(root: Path, stages: tuple[str, ...]) -> dict[str, dict[str, str]]:
    versions: dict[str, dict[str, str]] = {}
    for stage in stages:
        files = _files(root, stage)
        if files:
            metadata = read_file_metadata(files[0])
            versions[stage] = {
                key: metadata[key] for key in ("code_version", "contract_version") if key in metadata
            }
    return versions


def table_facts(root: str | Path, local: LocalTable) -> TableFacts:
    """The facts of the card's sections for ``local``, read under ``root``."""
    root = Path(root)
    spec = publishable(local.name)
    values = column_counts(local.files, ["origin", "source", "benchmark", "category", "task_type", "split"])
    quarantines = [quarantine_counts(root, stage) for stage in spec.lineage]
    return TableFacts(
        name=local.name,
        local=local,
        values=values,
        settings=_settings(root, local.name),
        stage_versions=_stage_versions(root, spec.lineage),
        quarantine=[count for count in quarantines if count is not None],
    )


def uses_coco_boxes(root: str | Path, table: str) -> bool:
    """Whether the pseudo-GT of a SpatialCORE table came from COCO annotations (the ``annotations`` backend)."""
    if table not in ("spatialcore_train", "sft_cold_start"):
        return False
    return any(
        row["backend"] == "annotations" for row in distinct_values(Path(root), "pseudo_gt_boxes", ["backend"])
    )
