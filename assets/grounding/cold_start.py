"""The SFT cold-start set (SpatialCORE appendix A.4): target completions for 1,000 training samples.

Each target is the sample's pseudo-GT bbox lines (in the model family's coordinate convention), a
reasoning trace, ``</think>`` and the gold letter, built by :func:`training.sft.build_sft_targets`.
The trace is a template written from the boxes' positions (offline default), or written by an LLM of
the client layer from the image, the question, the boxes and the gold answer (prompt
:data:`REASONING_PROMPT_VERSION`, JSON schema :data:`REASONING_SCHEMA`). A sample whose LLM answer is
unusable is quarantined and left out of the set; the others go on.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from typing import Any, Literal

import polars as pl
from pydantic import Field

from data_contracts.quarantine import QuarantineLog
from model_clients.failures import FailureBudgetSettings
from training.sft import SFT_COLD_START_SAMPLES, ReasoningFunction, build_sft_frame

logger = logging.getLogger(__name__)

ASSET_NAME = "sft_cold_start"
RESOURCE_KEY = "sft_reasoning_llm"
"""The Dagster resource of the ``llm`` reasoning backend's client."""
REASONING_PROMPT_NAME = "sft_reasoning"
REASONING_PROMPT_VERSION = "v1"
REASONING_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["reasoning"],
    "properties": {"reasoning": {"type": "string", "minLength": 1}},
}
REASONING_SYSTEM_PROMPT = """\
You write the reasoning part of a worked answer to a spatial question about an image.
You are given the question, its options, boxes of the relevant objects on a 0-1000 grid of the image \
(x to the right, y down), and the correct option.
Write 2 to 5 short sentences that locate the relevant objects (using the boxes where given), reason \
about their spatial relation, and arrive at the correct option. Write as someone solving the question: \
never say that the answer or the boxes were given. Do not write the final letter on its own line.
Answer with JSON only: {"reasoning": "..."}."""


class ColdStartSettings(FailureBudgetSettings):
    """What the cold-start set holds (the ``sft_cold_start`` run config extends this model).

    >>> ColdStartSettings().samples
    1000
    """

    samples: int = Field(
        default=SFT_COLD_START_SAMPLES, description="Training samples in the set (paper: 1,000)."
    )
    seed: int = Field(default=0, description="Seed of the selection.")
    model_family: str = Field(default="qwen3_vl", description="Coordinate convention of the bbox lines.")
    reasoning: Literal["template", "llm"] = Field(
        default="template",
        description="'template' (offline, from the boxes) or 'llm' (the sft_reasoning_llm resource).",
    )
    split: str = Field(default="train", description="Rows of this split are drawn.")

    @property
    def calls_model(self) -> bool:
        """True when the reasoning traces are written by a model (it then needs an LLM client)."""
        return self.reasoning == "llm"


def render_reasoning_prompt(row: dict) -> str:
    """The user message asking for a reasoning trace.

    Example:
        >>> print(render_reasoning_prompt({"question": "Which is closer?", "options": ["cup", "dog"], "answer": "B",
        ...     "pseudo_gt": [{"bbox_2d": [10, 20, 30, 40], "label": "dog", "validity": 0.9}]}))
        Question: Which is closer?
        Options:
        A. cup
        B. dog
        Boxes:
        dog: [10, 20, 30, 40]
        Correct option: B
    """
    lines = [f"Question: {row['question'].strip()}"]
    options = row.get("options") or []
    if options:
        lines.append("Options:")
        lines.extend(f"{chr(ord('A') + index)}. {option}" for index, option in enumerate(options))
    boxes = row.get("pseudo_gt") or []
    if boxes:
        lines.append("Boxes:")
        lines.extend(f"{item['label']}: {list(item['bbox_2d'])}" for item in boxes)
    lines.append(f"Correct option: {row['answer']}")
    return "\n".join(lines)


def select_rows(spatialcore_train: pl.DataFrame, settings: ColdStartSettings) -> pl.DataFrame:
    """The seeded selection of training rows (as :func:`training.sft.build_sft_frame` draws it)."""
    frame = (
        spatialcore_train.filter(pl.col("split") == settings.split) if settings.split else spatialcore_train
    )
    if frame.height > settings.samples:
        frame = frame.sample(n=settings.samples, seed=settings.seed, shuffle=True)
    return frame


def reasoning_requests(rows: pl.DataFrame) -> list:
    """The :class:`~model_clients.LLMRequest` asking a reasoning trace for each row (image first when present)."""
    from model_clients import LLMRequest

    requests = []
    for row in rows.iter_rows(named=True):
        image = (row.get("image") or {}).get("bytes")
        requests.append(
            LLMRequest(
                template_name=REASONING_PROMPT_NAME,
                template_version=REASONING_PROMPT_VERSION,
                prompt=render_reasoning_prompt(row),
                system=REASONING_SYSTEM_PROMPT,
                images=(image,) if image else (),
                schema=REASONING_SCHEMA,
                schema_name="sft_reasoning",
                parameters={"image_detail": "low", "max_tokens": 400},
                request_id=row["question_id"],
            )
        )
    return requests


def llm_reasoning(
    rows: pl.DataFrame, client: Any, log: QuarantineLog, progress: bool = True
) -> dict[str, str]:
    """Reasoning traces written by an LLM (`question_id -> text`); failures go to ``log``."""
    requests = reasoning_requests(rows)
    traces: dict[str, str] = {}
    results = client.run_batch(requests, progress=progress, description="SFT reasoning") if requests else []
    for result in results:
        text = result.data.get("reasoning") if result.ok and isinstance(result.data, dict) else None
        if not isinstance(text, str) or not text.strip():
            row = result.quarantine_row(ASSET_NAME, resource=RESOURCE_KEY)
            reason = row["reason"] if not result.ok else "invalid_response: answer has no reasoning text"
            log.add(row["record_id"], reason, payload=json.loads(row["payload_json"]))
            continue
        traces[result.request_id] = text.strip()
    return traces


def build_cold_start(
    spatialcore_train: pl.DataFrame,
    settings: ColdStartSettings,
    *,
    llm_client: Any = None,
    progress: bool = True,
) -> tuple[pl.DataFrame, QuarantineLog, str]:
    """The `sft_cold_start` rows: selected training rows plus `completion`, `model_family`, `reasoning_backend`.

    Args:
        spatialcore_train (`pl.DataFrame`): the training table.
        settings (`ColdStartSettings`): size, seed, family and reasoning backend.
        llm_client (`model_clients.LLMClient`, *optional*): required for `reasoning="llm"`.
        progress (`bool`, *optional*): show progress bars.

    Returns:
        `tuple[pl.DataFrame, QuarantineLog, str]`: rows, quarantine, and the reasoning backend's name.
    """
    log = QuarantineLog(ASSET_NAME)
    selected = select_rows(spatialcore_train, settings)
    if settings.reasoning == "llm":
        if llm_client is None:
            raise ValueError("reasoning='llm' needs an LLM client (the `sft_reasoning_llm` resource)")
        config = llm_client.config
        backend = f"{config.provider}/{config.model}/{REASONING_PROMPT_NAME}@{REASONING_PROMPT_VERSION}"
        traces = llm_reasoning(selected, llm_client, log, progress)
        selected = selected.filter(pl.col("question_id").is_in(list(traces)))

        def llm_trace(row: dict, kept: Sequence[dict]) -> str:
            """The model's reasoning trace of ``row`` (the examples already kept play no part)."""
            return traces[row["question_id"]]

        reasoning_fn: ReasoningFunction | None = llm_trace
    else:
        backend = "template"
        reasoning_fn = None
    before = set(selected["question_id"].to_list())
    frame = build_sft_frame(
        selected,
        samples=max(selected.height, 1),
        seed=settings.seed,
        family=settings.model_family,
        reasoning_fn=reasoning_fn,
        split=None,
    )
    for question_id in sorted(before - set(frame["question_id"].to_list())):
        log.add(question_id, "gold answer is not an option letter; no target completion")
    frame = frame.with_columns(
        pl.lit(settings.model_family).alias("model_family"), pl.lit(backend).alias("reasoning_backend")
    ).sort("question_id")
    logger.info("SFT cold start: %d rows (%s reasoning), %d quarantined", frame.height, backend, len(log))
    return frame, log, backend
