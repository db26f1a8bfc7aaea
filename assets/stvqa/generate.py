"""STVQA question generation: scene graphs in, checked candidate questions (and a quarantine) out.

Two backends, chosen by configuration:

- ``template`` (offline, the default): every template of :mod:`assets.stvqa.templates` proposes
  questions for each image; :func:`~assets.stvqa.balance.select_questions` keeps
  ``questions_per_image`` of them, steering the running category/level balance toward the targets.
  Deterministic for a seed; no model, no key.
- ``anthropic`` (Claude Sonnet 4 by default, temperature 0): one request per image through the shared
  LLM client layer (cache, retries, rate limit, cost), with the versioned prompt of
  :mod:`assets.stvqa.prompts` and its JSON schema. Images are sent in chunks; the running balance
  printed into the next chunk's prompts includes everything generated before it. An answer that is
  not JSON of the schema is asked again once by the client layer and then quarantined with its raw
  text; an answer whose items break :func:`~assets.stvqa.validation.validate_item` (gold letter outside
  the options, duplicate options...) is asked again once with the problems listed, and the items
  still invalid after that are quarantined.

Both paths then do the same: a scene graph with a missing image, a zero-area box or a dangling
relation is quarantined whole; each item gets its ground-truth scene
(:func:`~assets.stvqa.gt_scene.question_scene`); count items are checked against the filtered scene
and corrected or quarantined (:func:`~assets.stvqa.gt_scene.check_count`).

Example (offline):

    >>> from assets.stvqa.generate import GenerationConfig, generate_candidates
    >>> output = generate_candidates(scene_graph_rows, GenerationConfig(questions_per_image=4))  # doctest: +SKIP
    >>> output.candidates.select("question", "options", "answer").head()  # doctest: +SKIP
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import polars as pl
from tqdm.auto import tqdm

from assets.stvqa.balance import RunningBalance, select_questions
from assets.stvqa.geometry import ImageGeometry
from assets.stvqa.gt_scene import check_count, question_scene
from assets.stvqa.prompts import (
    GENERATION_PROMPT_VERSION,
    GENERATION_TEMPLATE_NAME,
    generation_schema,
    render_generation_prompt,
    render_generation_system,
)
from assets.stvqa.scene import Scene, build_scene, scene_graph_problems
from assets.stvqa.shards import shard_of
from assets.stvqa.templates import DEFAULT_ABSENT_NAMES, GenerationContext, generate_template_questions
from assets.stvqa.validation import GeneratedItem, validate_item
from assets.stvqa.vocabulary import LEVEL_TARGETS, category_targets
from data_contracts.quarantine import QuarantineLog
from data_contracts.stvqa_candidates import StvqaCandidates
from data_contracts.validation import polars_schema
from llm import LLMClient, LLMRequest, LLMResult

logger = logging.getLogger(__name__)

BACKENDS = ("template", "anthropic")
TEMPLATE_GENERATOR_VERSION = "stvqa-templates-v1"
SOURCE_ASSET = "stvqa_candidates"


@dataclass
class GenerationConfig:
    """Settings of question generation.

    Args:
        backend (`str`, defaults to `"template"`): `"template"` (offline) or `"anthropic"` (an LLM client).
        questions_per_image (`int`, defaults to `3`): questions kept (template) or asked for (LLM) per image.
        seed (`int`, defaults to `0`): seed of the template choices (distractors, option order, ties).
        category_targets (`Mapping[str, float]`, *optional*): target category shares (default 50% relation,
            the other eight equal).
        level_targets (`Mapping[str, float]`, *optional*): target level shares (default 40/40/20).
        chunk_size (`int`, defaults to `16`): images per LLM batch; the balance in the prompts is updated
            between batches.
        max_tokens (`int`, defaults to `2048`): completion limit of a generation call.
        temperature (`float`, defaults to `0.0`): sampling temperature of a generation call.
        send_image (`bool`, defaults to `False`): send the image with the scene graph (SpatialThinker sends
            the graph only).
        max_per_template (`int`, defaults to `2`): template questions of one template kept per image.
        show_progress (`bool`, defaults to `True`): progress bars.
    """

    backend: str = "template"
    questions_per_image: int = 3
    seed: int = 0
    category_targets: Mapping[str, float] | None = None
    level_targets: Mapping[str, float] | None = None
    chunk_size: int = 16
    max_tokens: int = 2048
    temperature: float = 0.0
    send_image: bool = False
    max_per_template: int = 2
    show_progress: bool = True

    def __post_init__(self) -> None:
        if self.backend not in BACKENDS:
            raise ValueError(f"backend must be one of {BACKENDS}, got {self.backend!r}")
        if self.questions_per_image < 1 or self.chunk_size < 1:
            raise ValueError("questions_per_image and chunk_size must be at least 1")

    def new_balance(self) -> RunningBalance:
        """An empty running balance with this configuration's targets."""
        return RunningBalance(
            category_targets=dict(self.category_targets or category_targets()),
            level_targets=dict(self.level_targets or LEVEL_TARGETS),
        )


@dataclass
class GenerationOutput:
    """What generation produced for a batch of scene graphs.

    Attributes:
        candidates (`pl.DataFrame`): rows of the ``stvqa_candidates`` contract.
        quarantine (`QuarantineLog`): rejected scene graphs, model answers and items, with reasons.
        generated_counts (`dict`): items as generated (before checks), per category and level.
        kept_counts (`dict`): candidate rows per category and level.
        stats (`dict`): images read, quarantined, without questions; count corrections; duplicates.
    """

    candidates: pl.DataFrame
    quarantine: QuarantineLog
    generated_counts: dict[str, dict[str, int]] = field(default_factory=dict)
    kept_counts: dict[str, dict[str, int]] = field(default_factory=dict)
    stats: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class _Proposal:
    """One generated item of one image, before the ground-truth checks."""

    image_id: str
    item: GeneratedItem
    generator: str
    prompt_version: str
    template: str | None = None
    facts: dict[str, Any] | None = None


def question_id(image_id: str, question: str, options: Sequence[str]) -> str:
    """A stable id from the image and the question's text and options.

    >>> question_id("12", "Where is the cup?", ["on", "under"])
    '12-503f92730fff'
    """
    digest = hashlib.sha256("\x1f".join([question, *options]).encode("utf-8")).hexdigest()
    return f"{image_id}-{digest[:12]}"


def count_by(rows: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, int]]:
    """Counts per category and per level of rows (or items) with `category` and `level`.

    >>> count_by([{"category": "depth", "level": "easy"}])
    {'categories': {'depth': 1}, 'levels': {'easy': 1}}
    """
    categories = Counter(str(row.get("category")) for row in rows)
    levels = Counter(str(row.get("level")) for row in rows)
    return {"categories": dict(sorted(categories.items())), "levels": dict(sorted(levels.items()))}


def _payload(row: Mapping[str, Any]) -> dict[str, Any]:
    """A scene-graph row for the quarantine: everything but the image bytes."""
    image = row.get("image")
    return {
        "image_id": row.get("image_id"),
        "image_path": image.get("path") if isinstance(image, Mapping) else None,
        "image_width": row.get("image_width"),
        "image_height": row.get("image_height"),
        "objects": row.get("objects"),
        "relationships": row.get("relationships"),
        "source": row.get("source"),
    }


def read_scenes(
    rows: pl.DataFrame,
    geometry: Mapping[str, ImageGeometry] | None,
    quarantine: QuarantineLog,
    source_file: str | None = None,
) -> list[tuple[Scene, dict[str, Any]]]:
    """Check every ``scene_graphs`` row and build the scenes of the good ones (bad ones quarantined).

    Returns `(scene, row)` pairs sorted by image id.
    """
    scenes = []
    geometry = geometry or {}
    for row in rows.sort("image_id").iter_rows(named=True):
        problems = scene_graph_problems(row)
        if problems:
            quarantine.add(
                row.get("image_id"),
                "bad scene graph: " + "; ".join(problems),
                source_file=source_file,
                payload=_payload(row),
            )
            continue
        scenes.append((build_scene(row, geometry.get(str(row["image_id"]))), row))
    return scenes


def _absent_vocabulary(scenes: Sequence[Scene]) -> tuple[str, ...]:
    names = sorted({obj.name for scene in scenes for obj in scene.objects})
    return tuple(dict.fromkeys([*DEFAULT_ABSENT_NAMES, *names]))


def _template_proposals(
    scenes: Sequence[Scene], config: GenerationConfig, balance: RunningBalance
) -> list[_Proposal]:
    context = GenerationContext(seed=config.seed, absent_names=_absent_vocabulary(scenes))
    proposals = []
    for scene in tqdm(
        scenes, desc="stvqa templates", unit="image", disable=not config.show_progress, mininterval=1.0
    ):
        questions = generate_template_questions(scene, context)
        chosen = select_questions(
            questions,
            config.questions_per_image,
            balance,
            seed=config.seed,
            max_per_template=config.max_per_template,
        )
        for question in chosen:
            item = GeneratedItem(
                question.question,
                question.options,
                question.answer_letter,
                question.category,
                question.level,
                question.rating,
            )
            proposals.append(
                _Proposal(
                    scene.image_id,
                    item,
                    "template",
                    TEMPLATE_GENERATOR_VERSION,
                    question.template,
                    question.facts,
                )
            )
    return proposals


def _generation_request(
    scene: Scene,
    row: Mapping[str, Any],
    config: GenerationConfig,
    balance_text: str,
    feedback: Sequence[str] = (),
) -> LLMRequest:
    images = (bytes(row["image"]["bytes"]),) if config.send_image else ()
    return LLMRequest(
        template_name=GENERATION_TEMPLATE_NAME,
        template_version=GENERATION_PROMPT_VERSION,
        prompt=render_generation_prompt(scene, config.questions_per_image, balance_text, feedback),
        system=render_generation_system(),
        images=images,
        schema=generation_schema(config.questions_per_image),
        schema_name="stvqa_questions",
        parameters={"temperature": config.temperature, "max_tokens": config.max_tokens},
        sample_index=1 if feedback else 0,
        request_id=scene.image_id,
    )


def _validated_items(result: LLMResult) -> tuple[list[GeneratedItem], list[tuple[Any, list[str]]]]:
    """Valid items and (raw item, problems) pairs of one successful answer."""
    valid: list[GeneratedItem] = []
    invalid: list[tuple[Any, list[str]]] = []
    items = (result.data or {}).get("questions", []) if isinstance(result.data, Mapping) else []
    seen: set[tuple[str, tuple[str, ...]]] = set()
    for raw in items:
        item, problems = validate_item(raw)
        if item is not None:
            key = (item.question.casefold(), tuple(option.casefold() for option in item.options))
            if key in seen:
                continue
            seen.add(key)
            valid.append(item)
        else:
            invalid.append((raw, problems))
    return valid, invalid


def _anthropic_proposals(
    scenes: Sequence[tuple[Scene, dict[str, Any]]],
    config: GenerationConfig,
    balance: RunningBalance,
    client: LLMClient,
    quarantine: QuarantineLog,
    source_file: str | None,
    stats: Counter,
) -> tuple[list[_Proposal], list[dict[str, Any]]]:
    """Ask the model for every scene, chunk by chunk; returns proposals and every item as generated."""
    generator = f"{client.config.provider}:{client.config.model}"
    proposals: list[_Proposal] = []
    generated: list[dict[str, Any]] = []
    for start in range(0, len(scenes), config.chunk_size):
        chunk = scenes[start : start + config.chunk_size]
        balance_text = balance.describe()
        results = client.run_batch(
            [_generation_request(scene, row, config, balance_text) for scene, row in chunk],
            description="stvqa generation",
            progress=config.show_progress,
        )
        retry_positions: list[int] = []
        retry_requests: list[LLMRequest] = []
        outcomes: dict[int, tuple[list[GeneratedItem], list[tuple[Any, list[str]]]]] = {}
        for position, ((scene, row), result) in enumerate(zip(chunk, results, strict=True)):
            if not result.ok:
                quarantine.rows.append(
                    result.quarantine_row(
                        SOURCE_ASSET, record_id=scene.image_id, source_file=source_file or ""
                    )
                )
                stats["llm_answers_quarantined"] += 1
                continue
            valid, invalid = _validated_items(result)
            outcomes[position] = (valid, invalid)
            if invalid:
                feedback = sorted({problem for _, problems in invalid for problem in problems})
                retry_positions.append(position)
                retry_requests.append(_generation_request(scene, row, config, balance_text, feedback))
        if retry_requests:
            stats["generation_reasks"] += len(retry_requests)
            retried = client.run_batch(
                retry_requests, description="stvqa generation (re-ask)", progress=config.show_progress
            )
            for position, result in zip(retry_positions, retried, strict=True):
                scene = chunk[position][0]
                if result.ok:
                    outcomes[position] = _validated_items(result)
                else:
                    stats["llm_reasks_failed"] += 1
                    logger.warning(
                        "re-ask for image %s failed (%s); keeping the first answer's valid items",
                        scene.image_id,
                        result.error,
                    )
        for position, (valid, invalid) in sorted(outcomes.items()):
            scene = chunk[position][0]
            for raw, problems in invalid:
                quarantine.add(
                    scene.image_id,
                    "invalid generated item after one re-ask: " + "; ".join(problems),
                    source_file=source_file,
                    payload=raw,
                )
                fields = raw if isinstance(raw, Mapping) else {}
                generated.append(
                    {
                        "category": fields.get("category") or "unreadable",
                        "level": fields.get("level") or "unreadable",
                    }
                )
            for item in valid:
                generated.append({"category": item.category, "level": item.level})
                proposals.append(_Proposal(scene.image_id, item, generator, GENERATION_PROMPT_VERSION))
                balance.add(item.category, item.level)
    return proposals, generated


def _candidate_row(
    proposal: _Proposal, scene: Scene, item: GeneratedItem, gt_note: str | None
) -> dict[str, Any]:
    return {
        "question_id": question_id(scene.image_id, item.question, item.options),
        "image_id": scene.image_id,
        "shard": shard_of(scene.image_id),
        "question": item.question,
        "options": list(item.options),
        "answer": item.answer,
        "answer_index": item.answer_index,
        "category": item.category,
        "level": item.level,
        "rating": item.rating,
        "generator": proposal.generator,
        "prompt_version": proposal.prompt_version,
        "template": proposal.template,
        "facts": None if proposal.facts is None else json.dumps(proposal.facts, sort_keys=True, default=str),
        "image_width": scene.width,
        "image_height": scene.height,
        "gt_scene": question_scene(scene, item.question, item.options),
        "gt_note": gt_note,
        "source": scene.source,
    }


def generate_candidates(
    rows: pl.DataFrame,
    config: GenerationConfig | None = None,
    geometry: Mapping[str, ImageGeometry] | None = None,
    client: LLMClient | None = None,
    source_file: str | None = None,
) -> GenerationOutput:
    """Generate checked candidate questions for ``scene_graphs`` rows.

    Args:
        rows (`pl.DataFrame`): ``scene_graphs`` rows (one shard, typically).
        config (`GenerationConfig`, *optional*): settings; the offline template backend by default.
        geometry (`Mapping[str, dict[str, ObjectGeometry]]`, *optional*): metric geometry per image id.
        client (`LLMClient`, *optional*): required by the ``anthropic`` backend.
        source_file (`str`, *optional*): the scene-graph file, named in quarantine rows.

    Returns:
        `GenerationOutput`: candidate rows, the quarantine and counts.
    """
    config = config or GenerationConfig()
    quarantine = QuarantineLog(SOURCE_ASSET)
    stats: Counter = Counter()
    scenes = read_scenes(rows, geometry, quarantine, source_file)
    stats["images"] = rows.height
    stats["images_quarantined"] = rows.height - len(scenes)
    balance = config.new_balance()
    if config.backend == "template":
        proposals = _template_proposals([scene for scene, _ in scenes], config, balance)
        generated = [{"category": p.item.category, "level": p.item.level} for p in proposals]
    else:
        if client is None:
            raise ValueError("the anthropic backend needs an LLM client (the stvqa_generator_llm resource)")
        proposals, generated = _anthropic_proposals(
            scenes, config, balance, client, quarantine, source_file, stats
        )

    by_image = {scene.image_id: scene for scene, _ in scenes}
    candidates: list[dict[str, Any]] = []
    seen_ids: set[str] = set()
    for proposal in proposals:
        scene = by_image[proposal.image_id]
        item = proposal.item
        note = None
        if item.category == "count":
            check = check_count(scene, item.question, item.options, item.answer)
            if check.rejected:
                quarantine.add(
                    proposal.image_id,
                    f"count check: {check.note}",
                    source_file=source_file,
                    payload=item.as_dict(),
                )
                stats["count_rejected"] += 1
                continue
            if check.note is not None:
                stats["count_corrected"] += 1
                note = check.note
                item = GeneratedItem(
                    item.question, item.options, check.answer, item.category, item.level, item.rating
                )
        row = _candidate_row(proposal, scene, item, note)
        if row["question_id"] in seen_ids:
            stats["duplicate_questions"] += 1
            continue
        seen_ids.add(row["question_id"])
        candidates.append(row)
    images_with_questions = {row["image_id"] for row in candidates}
    stats["images_without_questions"] = len(scenes) - len(images_with_questions)
    stats["items_without_gt_objects"] = sum(1 for row in candidates if not row["gt_scene"]["objects"])
    frame = (
        pl.DataFrame(candidates, schema=polars_schema(StvqaCandidates))
        if candidates
        else StvqaCandidates.create_empty()
    )
    return GenerationOutput(
        candidates=frame,
        quarantine=quarantine,
        generated_counts=count_by(generated),
        kept_counts=count_by(candidates),
        stats=dict(stats),
    )
