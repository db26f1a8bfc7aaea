"""What the paid stages would cost: their requests built from their inputs, estimated without calling a model.

Four assets call paid models, each through its LLM resource:

| stage | resource | requests |
|---|---|---|
| ``object_phrases`` | ``phrase_llm`` | one per training question (``mcq_questions``, skipped task types left out) |
| ``stvqa_candidates`` | ``stvqa_generator_llm`` | one per scene-graph image (``scene_graphs``) |
| ``stvqa_validated`` | ``stvqa_judge_llm`` | two tries per candidate (``stvqa_candidates``); a second round of two more for the questions both miss |
| ``sft_cold_start`` | ``sft_reasoning_llm`` | one per selected training row (``spatialcore_train``) |

:func:`estimate_costs` reads each stage's input table from the storage root (when it is materialised),
builds the stage's requests exactly as the stage does with its model backend, and asks the resource's
client for the estimate (:meth:`model_clients.client.LLMClient.estimate`: uncached requests only, prompt
tokens as the provider counts text and images, completion tokens from the observed mean or the budget,
at the batch price in ``mode: batch``). No model is called and no key is needed. :func:`format_cost_table`
prints the table ``spatial-build --estimate-cost`` shows. The STVQA assets call
:func:`assets.resources.check_stage_budget` with the same requests before their first shard.

>>> print(format_cost_table([StageCost("object_phrases", "phrase_llm", "openai", "gpt-4o-mini", "batch",
...     "mcq_questions: 2 rows", CostEstimate(2, 0, 6000, 40, 0.000462, True, "max_tokens budget"), "")]))
stage           resource    model               mode   requests  cached  prompt tokens  completion tokens  est. USD  note
object_phrases  phrase_llm  openai/gpt-4o-mini  batch         2       0          6,000                 40    0.0005  mcq_questions: 2 rows
TOTAL                                                         2       0          6,000                 40    0.0005
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from assets.grounding.cold_start import ColdStartSettings, reasoning_requests, select_rows
from assets.grounding.phrases import PhraseSettings, build_phrase_request, is_skipped_task
from assets.grounding.training_table import select_training_questions
from assets.stvqa.generate import QuestionGenerationSettings, generation_request, read_scenes
from assets.stvqa.pass_at_2 import PassAt2Settings, answer_request, load_scenes
from data_contracts.image_store import embed_images
from data_contracts.quarantine import QuarantineLog
from data_contracts.storage import MissingTableError, read_table, table_path
from model_clients import CostEstimate, LLMRequest

__all__ = [
    "PAID_STAGES",
    "StageCost",
    "answer_requests",
    "estimate_costs",
    "format_cost_table",
    "generation_requests",
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


def generation_requests(
    scene_graphs: pl.DataFrame,
    settings: QuestionGenerationSettings | None = None,
    geometry: Mapping[str, Any] | None = None,
) -> list[LLMRequest]:
    """The ``stvqa_candidates`` requests of ``scene_graphs`` rows, with the empty running balance (later chunks
    print a longer balance: a few tokens more)."""
    settings = settings or QuestionGenerationSettings(backend="anthropic")
    scenes = read_scenes(scene_graphs, geometry, QuarantineLog("stvqa_candidates"))
    balance_text = settings.new_balance().describe()
    return [generation_request(scene, row, settings, balance_text) for scene, row in scenes]


def answer_requests(
    candidates: pl.DataFrame, scene_graphs: pl.DataFrame, settings: PassAt2Settings | None = None
) -> list[LLMRequest]:
    """The first round of ``stvqa_validated``: ``tries_per_round`` tries of every candidate whose image is usable."""
    settings = settings or PassAt2Settings(backend="openai")
    image_ids = set(candidates["image_id"].to_list()) if candidates.height else set()
    _, images, _ = load_scenes(scene_graphs.filter(pl.col("image_id").is_in(sorted(image_ids))), None)
    return [
        answer_request(row, images[row["image_id"]], settings, try_index)
        for row in candidates.iter_rows(named=True)
        if row["image_id"] in images
        for try_index in range(settings.tries_per_round)
    ]


def _read(storage_root: str | Path, table: str) -> pl.DataFrame | None:
    try:
        return read_table(storage_root, table)
    except MissingTableError:
        return None


def _stage_requests(
    stage: str, storage_root: str | Path, geometry: Mapping[str, Any] | None
) -> tuple[list[LLMRequest] | None, str, str]:
    """(requests or None, what the input was, a note) of one stage."""
    table = PAID_STAGES[stage][1]
    frame = _read(storage_root, table)
    if frame is None:
        return None, f"{table}: not materialised", f"materialise {table} first"
    inputs = f"{table}: {frame.height:,} rows"
    if stage == "object_phrases":
        questions = select_training_questions(frame, ["omnispatial"], ["train"])
        if "image" not in questions.columns:  # the images are stored once each, in mcq_images
            questions = embed_images(questions, table_path(storage_root, "mcq_images"))
        return phrase_requests(questions), inputs, ""
    if stage == "stvqa_candidates":
        return generation_requests(frame, geometry=geometry), inputs, "balance text of the first chunk"
    if stage == "sft_cold_start":
        return reasoning_requests(select_rows(frame, ColdStartSettings(reasoning="llm"))), inputs, ""
    scene_graphs = _read(storage_root, "scene_graphs")
    if scene_graphs is None:
        return None, inputs, "materialise scene_graphs first"
    note = "round 1; round 2 asks 2 more tries of the questions both first tries miss"
    return answer_requests(frame, scene_graphs), inputs, note


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
        requests, inputs, note = _stage_requests(stage, storage_root, geometry)
        estimate = None
        if requests is not None:
            with resource.get_client() as client:
                estimate = client.estimate(requests, label=stage)
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
        "cached",
        "prompt tokens",
        "completion tokens",
        "est. USD",
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
                    "-",
                    "-",
                    "-",
                    "-",
                    "-",
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
                f"{estimate.requests:,}",
                f"{estimate.cached:,}",
                f"{estimate.prompt_tokens:,}",
                f"{estimate.completion_tokens:,}",
                f"{estimate.cost_usd:.4f}",
                note,
            )
        )
    lines.append(
        (
            "TOTAL",
            "",
            "",
            "",
            f"{total.requests:,}",
            f"{total.cached:,}",
            f"{total.prompt_tokens:,}",
            f"{total.completion_tokens:,}",
            f"{total.cost_usd:.4f}",
            "",
        )
    )
    widths = [max(len(line[column]) for line in lines) for column in range(len(header))]
    numeric = range(4, 9)
    rendered = []
    for line in lines:
        cells = [
            cell.rjust(widths[column]) if column in numeric else cell.ljust(widths[column])
            for column, cell in enumerate(line)
        ]
        rendered.append("  ".join(cells).rstrip())
    return "\n".join(rendered)
