"""What the paid stages would cost: their requests built from their inputs, estimated without calling a model.

Four assets call paid models, each through its LLM resource:

| stage | resource | requests |
|---|---|---|
| ``object_phrases`` | ``phrase_llm`` | one per training question (``mcq_questions``, skipped task types left out) |
| ``stvqa_candidates`` | ``stvqa_generator_llm`` | one per scene-graph image (``scene_graphs``); at most one re-ask each |
| ``stvqa_validated`` | ``stvqa_judge_llm`` | two tries per candidate (``stvqa_candidates``); at most two more each in round 2 |
| ``sft_cold_start`` | ``sft_reasoning_llm`` | one per selected training row (``spatialcore_train``) |

:func:`estimate_costs` reads each stage's input from the storage root (when it is materialised), one STVQA shard
at a time (only that shard's rows: the ids first, then the shard's rows, image bytes included), builds the
stage's requests exactly as the stage does with its model backend (the shard's task of
:mod:`model_clients.rounds`: the first round, and the later rounds at most), and asks the resource's client for
the estimate (:meth:`model_clients.client.LLMClient.estimate`: uncached requests only, prompt tokens as the
provider counts text and images, completion tokens from the observed mean or the budget, at the batch price in
``mode: batch``, and the upper bound a budget is checked against: every round, every re-ask). No model is called
and no key is needed. :func:`format_cost_table` prints the table ``spatial-build --estimate-cost`` shows.

>>> print(format_cost_table([StageCost("object_phrases", "phrase_llm", "openai", "gpt-4o-mini", "batch",
...     "mcq_questions: 2 rows", CostEstimate(2, 0, 6000, 40, 0.000462, True, "max_tokens budget",
...     upper_bound_usd=0.000924), "")]))
stage           resource    model               mode   requests  later  cached  prompt tokens  completion tokens  est. USD  at most USD  note
object_phrases  phrase_llm  openai/gpt-4o-mini  batch         2      0       0          6,000                 40    0.0005       0.0009  mcq_questions: 2 rows
TOTAL                                                         2      0       0          6,000                 40    0.0005       0.0009
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from assets.grounding.cold_start import ColdStartSettings, reasoning_requests, select_rows
from assets.grounding.phrases import PhraseSettings, build_phrase_request, is_skipped_task
from assets.grounding.training_table import select_training_questions
from assets.stvqa.generate import GenerationTask, QuestionGenerationSettings
from assets.stvqa.pass_at_2 import PassAt2Settings, PassAt2Task
from assets.stvqa.shards import STVQA_SHARD_KEYS, read_image_rows, read_shard_rows, shard_of
from data_contracts.image_store import embed_images
from data_contracts.storage import table_path
from model_clients import CostEstimate, LLMClient, LLMRequest

__all__ = [
    "PAID_STAGES",
    "StageCost",
    "estimate_costs",
    "format_cost_table",
    "phrase_requests",
]

logger = logging.getLogger(__name__)

PAID_STAGES: Mapping[str, tuple[str, str]] = {
    "object_phrases": ("phrase_llm", "mcq_questions"),
    "stvqa_candidates": ("stvqa_generator_llm", "scene_graphs"),
    "stvqa_validated": ("stvqa_judge_llm", "stvqa_candidates"),
    "sft_cold_start": ("sft_reasoning_llm", "spatialcore_train"),
}
"""Each paid stage's LLM resource and input table."""
IMAGE_BATCH_ROWS = 256
"""Questions whose images are read at a time for the ``object_phrases`` estimate."""


@dataclass(frozen=True)
class StageCost:
    """One row of the cost table: a stage, its model and mode, and the estimate (None when its input is missing)."""

    stage: str
    resource: str
    provider: str
    model: str
    mode: str
    inputs: str
    estimate: CostEstimate | None
    note: str = ""


def phrase_requests(questions: pl.DataFrame, settings: PhraseSettings | None = None) -> list[LLMRequest]:
    """The ``object_phrases`` requests of an ``mcq_questions``-like frame (skipped task types left out)."""
    settings = settings or PhraseSettings(backend="openai")
    images = questions["image"] if settings.send_image and "image" in questions.columns else None
    requests = []
    for index, row in enumerate(
        questions.select("question_id", "question", "options", "task_type", "sub_task_type").iter_rows(
            named=True
        )
    ):
        if is_skipped_task(row["task_type"], row["sub_task_type"] or "", settings.skip_task_types):
            continue
        image = images[index] if images is not None else None
        requests.append(
            build_phrase_request(
                row["question_id"],
                row["question"],
                row["options"] or [],
                image["bytes"] if image is not None else None,
                settings.image_detail,
            )
        )
    return requests


def _scan(storage_root: str | Path, table: str, partition: str | None = None) -> pl.LazyFrame | None:
    path = table_path(storage_root, table, partition)
    return pl.scan_parquet(path) if path.is_file() else None


def _shards_of(scan: pl.LazyFrame) -> dict[str, list[str]]:
    """The image ids of a ``scene_graphs`` scan by STVQA shard (only the id column is read)."""
    shards: dict[str, list[str]] = {}
    for image_id in scan.select("image_id").collect()["image_id"].to_list():
        shards.setdefault(shard_of(image_id), []).append(image_id)
    return shards


def _estimate_all(
    client: LLMClient, parts: Iterator[tuple[Sequence[LLMRequest], Sequence[LLMRequest]]]
) -> CostEstimate:
    """The sum of the estimates of a stage's parts (first round and later rounds of each shard)."""
    total = CostEstimate(batch=client.config.mode == "batch", priced=client.price is not None)
    for first, later in parts:
        total.add(client.estimate(first, later=later, log=False))
    return total


def _stage_estimate(
    stage: str, storage_root: str | Path, client: LLMClient, geometry: Mapping[str, Any] | None
) -> tuple[CostEstimate | None, str, str]:
    """(estimate or None, what the input was, a note) of one stage, reading its input part by part."""
    table = PAID_STAGES[stage][1]
    if stage == "stvqa_validated":
        return _validated_estimate(storage_root, table, client)
    scan = _scan(storage_root, table)
    if scan is None:
        return None, f"{table}: not materialised", f"materialise {table} first"
    if stage == "stvqa_candidates":
        return _candidates_estimate(storage_root, table, scan, client, geometry)
    if stage == "object_phrases":
        return _phrases_estimate(storage_root, table, scan, client)
    return _cold_start_estimate(table, scan, client)


def _validated_estimate(
    storage_root: str | Path, table: str, client: LLMClient
) -> tuple[CostEstimate | None, str, str]:
    """The pass@2 stage's estimate: every materialised shard of candidates, with its images' scene graphs."""
    shards = [key for key in STVQA_SHARD_KEYS if table_path(storage_root, table, key).is_file()]
    if not shards:
        return None, f"{table}: not materialised", f"materialise {table} first"
    scene_graphs = table_path(storage_root, "scene_graphs")
    if not scene_graphs.is_file():
        return None, f"{table}: {len(shards)} shards", "materialise scene_graphs first"
    rows = 0
    settings = PassAt2Settings(backend="openai")

    def validated_parts() -> Iterator[tuple[Sequence[LLMRequest], Sequence[LLMRequest]]]:
        nonlocal rows
        for shard in shards:
            candidates = pl.read_parquet(table_path(storage_root, table, shard))
            rows += candidates.height
            scene_rows = read_image_rows(scene_graphs, candidates["image_id"].unique().to_list())
            yield PassAt2Task(candidates, scene_rows, settings, None, progress=False).planned_requests()

    estimate = _estimate_all(client, validated_parts())
    return estimate, f"{table}: {rows:,} rows in {len(shards)} shards", "round 2 at most: every question"


def _candidates_estimate(
    storage_root: str | Path,
    table: str,
    scan: pl.LazyFrame,
    client: LLMClient,
    geometry: Mapping[str, Any] | None,
) -> tuple[CostEstimate | None, str, str]:
    """The generation stage's estimate: every shard of the scene graphs, read one shard at a time."""
    shards = _shards_of(scan)
    settings = QuestionGenerationSettings(backend="anthropic")
    mode = client.config.mode
    path = table_path(storage_root, table)

    def candidate_parts() -> Iterator[tuple[Sequence[LLMRequest], Sequence[LLMRequest]]]:
        for shard in sorted(shards):  # only the shard's row groups are read
            rows = read_shard_rows(path, shard)
            yield GenerationTask(rows, settings, geometry, mode=mode, progress=False).planned_requests()

    images = sum(len(ids) for ids in shards.values())
    note = "re-ask at most: every image" + ("" if settings.planned_balance(mode) else "; balance of chunk 1")
    return (
        _estimate_all(client, candidate_parts()),
        f"{table}: {images:,} rows in {len(shards)} shards",
        note,
    )


def _phrases_estimate(
    storage_root: str | Path, table: str, scan: pl.LazyFrame, client: LLMClient
) -> tuple[CostEstimate | None, str, str]:
    """The phrase stage's estimate: the training questions, their images read a batch at a time."""
    questions = scan.collect()  # no image bytes: the questions name their images (mcq_images holds them)
    selected = select_training_questions(questions, ["omnispatial"], ["train"])
    images = table_path(storage_root, "mcq_images")

    def phrase_parts() -> Iterator[tuple[Sequence[LLMRequest], Sequence[LLMRequest]]]:
        for batch in selected.iter_slices(IMAGE_BATCH_ROWS):  # each batch's images read, then let go
            yield (
                phrase_requests(embed_images(batch, images) if "image" not in batch.columns else batch),
                [],
            )

    return _estimate_all(client, phrase_parts()), f"{table}: {questions.height:,} rows", ""


def _cold_start_estimate(
    table: str, scan: pl.LazyFrame, client: LLMClient
) -> tuple[CostEstimate | None, str, str]:
    """The cold-start stage's estimate: the selected rows, with the images of those only."""
    names = [name for name in scan.collect_schema().names() if name != "image"]
    frame = scan.select(names).collect()
    selected = select_rows(frame, ColdStartSettings(reasoning="llm"))
    if "image" in scan.collect_schema().names() and selected.height:
        wanted = selected["question_id"].to_list()
        images = scan.filter(pl.col("question_id").is_in(wanted)).select("question_id", "image").collect()
        selected = selected.join(images, on="question_id", how="left", maintain_order="left")
    return (
        _estimate_all(client, iter([(reasoning_requests(selected), [])])),
        f"{table}: {frame.height:,} rows",
        "",
    )


def estimate_costs(
    resources: Mapping[str, Any],
    storage_root: str | Path,
    stages: Sequence[str] | None = None,
    geometry: Mapping[str, Any] | None = None,
) -> list[StageCost]:
    """The cost table of the paid stages: each stage's requests from its materialised input, estimated by its
    resource's client (cache-aware, no model call, no key needed).

    Args:
        resources (`Mapping[str, Any]`): the Definitions' resources (an :class:`~assets.resources.LLMResource`
            per stage under the keys of :data:`PAID_STAGES`).
        storage_root (`str` or `Path`): where the input tables are.
        stages (`Sequence[str]`, *optional*): the stages to estimate (all four by default).
        geometry (`Mapping`, *optional*): per-image geometry of the scene graphs (the generation prompt's
            metric facts); none by default, a few tokens fewer per image.

    Returns:
        `list[StageCost]`: one row per stage.
    """
    rows = []
    for stage in stages or PAID_STAGES:
        resource_key = PAID_STAGES[stage][0]
        resource = resources[resource_key]
        unpriced = resource.model_copy(update={"max_cost_usd": None})  # the table also shows unpriced models
        with unpriced.get_client(storage_root=storage_root) as client:
            estimate, inputs, note = _stage_estimate(stage, storage_root, client, geometry)
        if estimate is not None and not estimate.priced:
            note = "; ".join(part for part in (note, "no price: set price_table on the resource") if part)
        rows.append(
            StageCost(
                stage, resource_key, resource.provider, resource.model, resource.mode, inputs, estimate, note
            )
        )
    return rows


def format_cost_table(rows: Sequence[StageCost]) -> str:
    """The cost table as aligned plain text, with a total line."""
    header = (
        "stage",
        "resource",
        "model",
        "mode",
        "requests",
        "later",
        "cached",
        "prompt tokens",
        "completion tokens",
        "est. USD",
        "at most USD",
        "note",
    )
    lines: list[tuple[str, ...]] = [header]
    total = CostEstimate()
    for row in rows:
        estimate = row.estimate
        note = "; ".join(part for part in (row.inputs, row.note) if part)
        if estimate is None:
            lines.append(
                (
                    row.stage,
                    row.resource,
                    f"{row.provider}/{row.model}",
                    row.mode,
                    *["-"] * 7,
                    note,
                )
            )
            continue
        total.add(estimate)
        lines.append(
            (
                row.stage,
                row.resource,
                f"{row.provider}/{row.model}",
                row.mode,
                *_figures(estimate),
                note,
            )
        )
    lines.append(("TOTAL", "", "", "", *_figures(total), ""))
    widths = [max(len(line[column]) for line in lines) for column in range(len(header))]
    numeric = range(4, 11)
    rendered = []
    for line in lines:
        cells = [
            cell.rjust(widths[column]) if column in numeric else cell.ljust(widths[column])
            for column, cell in enumerate(line)
        ]
        rendered.append("  ".join(cells).rstrip())
    return "\n".join(rendered)


def _figures(estimate: CostEstimate) -> tuple[str, ...]:
    """The numeric cells of a row: first-round requests, later ones at most, cached, first-round tokens and dollars,
    and the upper bound ("unpriced" without a price)."""
    dollars = (
        (f"{estimate.cost_usd:.4f}", f"{estimate.upper_bound_usd:.4f}")
        if estimate.priced
        else ("unpriced", "unpriced")
    )
    return (
        f"{estimate.requests:,}",
        f"{estimate.later_requests:,}",
        f"{estimate.cached:,}",
        f"{estimate.prompt_tokens:,}",
        f"{estimate.completion_tokens:,}",
        *dollars,
    )
