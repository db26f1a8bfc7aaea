"""STVQA question generation: scene graphs in, checked candidate questions (and a quarantine) out.

Two backends, chosen once by the ``backend`` setting (:class:`GenerationTask`); each proposes items for the
checked scenes, steering the category/level balance:

- ``template`` (offline, the default; :class:`TemplateProposer`): every template of :mod:`assets.stvqa.templates` proposes
  questions for each image; :func:`~assets.stvqa.balance.select_questions` keeps
  ``questions_per_image`` of them, steering the running category/level balance toward the targets.
  Deterministic for a seed; no model, no key.
- ``anthropic`` (Claude Sonnet 4 by default, temperature 0; :class:`ModelProposer`): one request per image through the shared
  LLM client layer (cache, retries, rate limit, cost), with the versioned prompt of
  :mod:`assets.stvqa.prompts` and its JSON schema. The prompt shows the category/level balance
  (``balance``): the *running* balance (sync mode's default, SpatialThinker's way) sends the images in
  chunks, each chunk's prompts counting everything generated before it, so the chunks go one after
  another; the *planned* balance (batch mode's default) writes every prompt up front, each image shown the
  balance as it would stand had every earlier image got its planned questions
  (:func:`~assets.stvqa.balance.planned_balance_texts`), so all images go in one round and a shard waits
  for batches once, or twice when some answers are asked again. An answer that is not JSON of the schema
  is asked again once by the client layer and then quarantined with its raw text; an answer whose items
  break :func:`~assets.stvqa.validation.validate_item` (gold letter outside the options, duplicate
  options...) is asked again once with the problems listed, and the items still invalid after that are
  quarantined.

The work of one shard is a :class:`GenerationTask` whose rounds (:mod:`model_clients.rounds`) a stage runs
together with those of its other shards, so that a round of every shard is one call (one wait in batch mode).

Both paths then do the same: a scene graph with a missing image, a zero-area box or a dangling
relation is quarantined whole; each item gets its ground-truth scene
(:func:`~assets.stvqa.gt_scene.question_scene`); count items are checked against the filtered scene
and corrected or quarantined (:func:`~assets.stvqa.gt_scene.check_count`).

Example (offline):

    >>> from assets.stvqa.generate import QuestionGenerationSettings, generate_candidates
    >>> settings = QuestionGenerationSettings(questions_per_image=4)
    >>> output = generate_candidates(scene_graph_rows, settings, progress=False)  # doctest: +SKIP
    >>> output.candidates.select("question", "options", "answer").head()  # doctest: +SKIP
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, Self

import polars as pl
from pydantic import Field, model_validator
from tqdm.auto import tqdm

from assets.stvqa.balance import RunningBalance, planned_balance_texts, select_questions
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
from model_clients import FailureBudgetSettings, LLMClient, LLMRequest, LLMResult
from model_clients.rounds import RequestRound, Rounds, run_offline, run_rounds

logger = logging.getLogger(__name__)

TEMPLATE_GENERATOR_VERSION = "stvqa-templates-v1"
SOURCE_ASSET = "stvqa_candidates"
RESOURCE_KEY = "stvqa_generator_llm"
"""The Dagster resource of the ``anthropic`` backend's client."""
GENERATION_TEMPERATURE = 0.0
"""Sampling temperature of a generation call (SpatialThinker generates at 0)."""


class QuestionGenerationSettings(FailureBudgetSettings):
    """Settings of question generation; the ``stvqa_candidates`` run config extends this model.

    The fields are run configuration; the ``ClassVar`` attributes (the generation call's completion limit, the
    template questions kept per template) are constants of the method, not run configuration.

    >>> QuestionGenerationSettings(backend="anthropic").calls_model
    True
    """

    backend: Literal["template", "anthropic"] = Field(
        default="template",
        description="'template' (offline) or 'anthropic' (the stvqa_generator_llm resource).",
    )
    questions_per_image: int = Field(
        default=3, description="Questions kept (template) or asked for (LLM) per image."
    )
    seed: int = Field(
        default=0, description="Seed of the template choices (distractors, option order, ties)."
    )
    category_targets: dict[str, float] = Field(
        default_factory=dict,
        description="Target share per category; empty = 50% relation, the other eight equal.",
    )
    level_targets: dict[str, float] = Field(
        default_factory=dict, description="Target share per level; empty = 40/40/20."
    )
    chunk_size: int = Field(
        default=16,
        description="Running balance: images per chunk; the balance in the prompt is updated between chunks, "
        "which go one after another (in batch mode, one wait each).",
    )
    balance: Literal["auto", "running", "planned"] = Field(
        default="auto",
        description="The balance the generation prompt shows: 'running' (what was generated before, chunk after "
        "chunk), 'planned' (every prompt written up front, each image shown the plan before it: one round for "
        "all images), or 'auto' (planned in the LLM resource's batch mode, running in sync mode).",
    )
    send_image: bool = Field(
        default=False,
        description="Send the image with the scene graph to the generator (SpatialThinker sends the graph only).",
    )

    # Constants of the method (not run configuration; a test may override them in a subclass).
    max_tokens: ClassVar[int] = 2048
    """Completion limit of a generation call."""
    max_per_template: ClassVar[int] = 2
    """Template questions of one template kept per image."""

    @model_validator(mode="after")
    def _check_sizes(self) -> Self:
        if self.questions_per_image < 1 or self.chunk_size < 1:
            raise ValueError("questions_per_image and chunk_size must be at least 1")
        return self

    @property
    def calls_model(self) -> bool:
        """True when the backend calls a model (it then needs an LLM client)."""
        return self.backend == "anthropic"

    def planned_balance(self, mode: str) -> bool:
        """True when the prompts show the balance planned up front (``balance``; ``auto``: in batch mode).

        >>> QuestionGenerationSettings().planned_balance("batch"), QuestionGenerationSettings().planned_balance("sync")
        (True, False)
        """
        return self.balance == "planned" or (self.balance == "auto" and mode == "batch")

    def new_balance(self) -> RunningBalance:
        """An empty running balance with these targets."""
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
        prompt_version (`str`): the template generator's or the generation prompt's version.
        generated_counts (`dict`): items as generated (before checks), per category and level.
        kept_counts (`dict`): candidate rows per category and level.
        stats (`dict`): images read, quarantined, without questions; count corrections; duplicates.
    """

    candidates: pl.DataFrame
    quarantine: QuarantineLog
    prompt_version: str
    generated_counts: dict[str, dict[str, int]] = field(default_factory=dict)
    kept_counts: dict[str, dict[str, int]] = field(default_factory=dict)
    stats: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class Proposal:
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
        "origin": row.get("origin"),
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


@dataclass
class GenerationLog:
    """What a generation run records besides its proposals: the quarantine, counters and the input file."""

    quarantine: QuarantineLog
    stats: Counter
    source_file: str | None = None


class TemplateProposer:
    """The offline backend: the templates of :mod:`assets.stvqa.templates`, selected toward the balance."""

    prompt_version = TEMPLATE_GENERATOR_VERSION

    def __init__(self, settings: QuestionGenerationSettings, progress: bool = True) -> None:
        self.settings = settings
        self.progress = progress

    def propose(
        self, scenes: Sequence[tuple[Scene, dict[str, Any]]], balance: RunningBalance, log: GenerationLog
    ) -> tuple[list[Proposal], list[dict[str, Any]]]:
        """Template questions of every scene; every proposal counts as generated."""
        plain_scenes = [scene for scene, _ in scenes]
        context = GenerationContext(seed=self.settings.seed, absent_names=_absent_vocabulary(plain_scenes))
        proposals = []
        for scene in tqdm(
            plain_scenes, desc="stvqa templates", unit="image", disable=not self.progress, mininterval=1.0
        ):
            proposals.extend(self._scene_proposals(scene, context, balance))
        return proposals, [{"category": p.item.category, "level": p.item.level} for p in proposals]

    def _scene_proposals(
        self, scene: Scene, context: GenerationContext, balance: RunningBalance
    ) -> list[Proposal]:
        chosen = select_questions(
            generate_template_questions(scene, context),
            self.settings.questions_per_image,
            balance,
            seed=self.settings.seed,
            max_per_template=self.settings.max_per_template,
        )
        return [
            Proposal(
                scene.image_id,
                GeneratedItem(
                    question.question,
                    question.options,
                    question.answer_letter,
                    question.category,
                    question.level,
                    question.rating,
                ),
                "template",
                TEMPLATE_GENERATOR_VERSION,
                question.template,
                question.facts,
            )
            for question in chosen
        ]


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


_Outcome = tuple[list[GeneratedItem], list[tuple[Any, list[str]]]]
"""Valid items and (raw item, problems) pairs of one image's answer."""


def generation_request(
    scene: Scene,
    row: Mapping[str, Any],
    settings: QuestionGenerationSettings,
    balance_text: str,
    feedback: Sequence[str] = (),
    planned: bool = False,
) -> LLMRequest:
    """The generation request of one image (`feedback`: the problems of its first answer, for the re-ask;
    `planned`: the balance text is the plan, not the running count)."""
    images = (bytes(row["image"]["bytes"]),) if settings.send_image else ()
    return LLMRequest(
        template_name=GENERATION_TEMPLATE_NAME,
        template_version=GENERATION_PROMPT_VERSION,
        prompt=render_generation_prompt(scene, settings.questions_per_image, balance_text, feedback, planned),
        system=render_generation_system(),
        images=images,
        schema=generation_schema(settings.questions_per_image),
        schema_name="stvqa_questions",
        parameters={"temperature": GENERATION_TEMPERATURE, "max_tokens": settings.max_tokens},
        sample_index=1 if feedback else 0,
        request_id=scene.image_id,
    )


FEEDBACK_PLACEHOLDER = ("(the problems of the first answer)",)
"""The feedback a re-ask is estimated with before its problems are known."""


class ModelProposer:
    """The model-calling backend: one request per image, its answers checked, in rounds of requests.

    With the running balance the images go chunk by chunk, each chunk's prompts counting what was generated
    before; with the planned balance every prompt is written up front and all images go in one round. Items that
    break :func:`~assets.stvqa.validation.validate_item` are asked again once (one more round) with the problems
    listed; what is still invalid then is quarantined.
    """

    prompt_version = GENERATION_PROMPT_VERSION

    def __init__(self, settings: QuestionGenerationSettings, generator: str, planned: bool) -> None:
        self.settings = settings
        self.generator = generator
        self.planned = planned

    def _request(
        self, scene: Scene, row: Mapping[str, Any], balance_text: str, feedback: Sequence[str] = ()
    ) -> LLMRequest:
        return generation_request(scene, row, self.settings, balance_text, feedback, self.planned)

    def first_requests(
        self, scenes: Sequence[tuple[Scene, dict[str, Any]]], balance: RunningBalance
    ) -> list[LLMRequest]:
        """The first request of every image: as they are sent (planned), or with the balance of the first chunk."""
        texts = self._balance_texts(len(scenes), balance)
        return [self._request(scene, row, text) for (scene, row), text in zip(scenes, texts, strict=True)]

    def reask_requests(
        self, scenes: Sequence[tuple[Scene, dict[str, Any]]], balance: RunningBalance
    ) -> list[LLMRequest]:
        """The re-ask of every image, at most (a placeholder for the problems it would list)."""
        texts = self._balance_texts(len(scenes), balance)
        return [
            self._request(scene, row, text, FEEDBACK_PLACEHOLDER)
            for (scene, row), text in zip(scenes, texts, strict=True)
        ]

    def _balance_texts(self, images: int, balance: RunningBalance) -> list[str]:
        if self.planned:
            plan = RunningBalance(dict(balance.category_targets), dict(balance.level_targets))
            return planned_balance_texts(images, self.settings.questions_per_image, plan)
        return [balance.describe()] * images

    def rounds(
        self, scenes: Sequence[tuple[Scene, dict[str, Any]]], balance: RunningBalance, log: GenerationLog
    ) -> Rounds[tuple[list[Proposal], list[dict[str, Any]]]]:
        """Ask the model for every scene; returns the proposals and every item as generated."""
        proposals: list[Proposal] = []
        generated: list[dict[str, Any]] = []
        # each chunk: its scenes and, when the balance is planned, their balance texts
        chunks: list[tuple[list[tuple[Scene, dict[str, Any]]], list[str] | None]]
        if self.planned:
            texts = self._balance_texts(len(scenes), balance)
            chunks = [(list(scenes), texts)] if scenes else []
        else:
            size = self.settings.chunk_size
            chunks = [(list(scenes[start : start + size]), None) for start in range(0, len(scenes), size)]
        for chunk, planned_texts in chunks:
            texts = planned_texts or [balance.describe()] * len(
                chunk
            )  # running: the balance as it stands now
            outcomes = yield from self._answer(chunk, texts, log)
            for position, (valid, invalid) in sorted(outcomes.items()):
                scene = chunk[position][0]
                generated.extend(self._quarantine_invalid(scene, invalid, log))
                for item in valid:
                    generated.append({"category": item.category, "level": item.level})
                    proposals.append(
                        Proposal(scene.image_id, item, self.generator, GENERATION_PROMPT_VERSION)
                    )
                    balance.add(item.category, item.level)
        return proposals, generated

    def _answer(
        self, chunk: Sequence[tuple[Scene, dict[str, Any]]], texts: Sequence[str], log: GenerationLog
    ) -> Rounds[dict[int, _Outcome]]:
        """The outcome per chunk position whose request succeeded (after one re-ask of invalid items)."""
        requests = [self._request(scene, row, text) for (scene, row), text in zip(chunk, texts, strict=True)]
        results = yield RequestRound("stvqa generation", requests)
        outcomes: dict[int, _Outcome] = {}
        reasks: dict[int, LLMRequest] = {}
        for position, ((scene, row), result) in enumerate(zip(chunk, results, strict=True)):
            if not result.ok:
                log.quarantine.rows.append(
                    result.quarantine_row(
                        SOURCE_ASSET,
                        record_id=scene.image_id,
                        source_file=log.source_file or "",
                        resource=RESOURCE_KEY,
                    )
                )
                log.stats["llm_answers_quarantined"] += 1
                continue
            valid, invalid = _validated_items(result)
            outcomes[position] = (valid, invalid)
            if invalid:
                feedback = sorted({problem for _, problems in invalid for problem in problems})
                reasks[position] = self._request(scene, row, texts[position], feedback)
        if reasks:
            log.stats["generation_reasks"] += len(reasks)
            results = yield RequestRound("stvqa generation (re-ask)", list(reasks.values()))
            for position, result in zip(reasks, results, strict=True):
                if result.ok:
                    outcomes[position] = _validated_items(result)
                    continue
                log.stats["llm_reasks_failed"] += 1
                logger.warning(
                    "re-ask for image %s failed (%s); keeping the first answer's valid items",
                    chunk[position][0].image_id,
                    result.error,
                )
        return outcomes

    @staticmethod
    def _quarantine_invalid(
        scene: Scene, invalid: Sequence[tuple[Any, list[str]]], log: GenerationLog
    ) -> list[dict[str, Any]]:
        """Quarantine the items still invalid after the re-ask; returns them as generated."""
        generated = []
        for raw, problems in invalid:
            log.quarantine.add(
                scene.image_id,
                "invalid generated item after one re-ask: " + "; ".join(problems),
                source_file=log.source_file,
                payload=raw,
            )
            fields = raw if isinstance(raw, Mapping) else {}
            generated.append(
                {
                    "category": fields.get("category") or "unreadable",
                    "level": fields.get("level") or "unreadable",
                }
            )
        return generated


def _candidate_row(
    proposal: Proposal, scene: Scene, item: GeneratedItem, gt_note: str | None
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
        "origin": scene.origin,
    }


def _checked_candidates(
    proposals: Sequence[Proposal], scenes: Sequence[tuple[Scene, dict[str, Any]]], log: GenerationLog
) -> list[dict[str, Any]]:
    """Candidate rows of the proposals: count answers checked (corrected or quarantined), duplicates dropped."""
    by_image = {scene.image_id: scene for scene, _ in scenes}
    candidates: list[dict[str, Any]] = []
    seen_ids: set[str] = set()
    for proposal in proposals:
        scene = by_image[proposal.image_id]
        item, note = _count_checked(proposal, scene, log)
        if item is None:
            continue
        row = _candidate_row(proposal, scene, item, note)
        if row["question_id"] in seen_ids:
            log.stats["duplicate_questions"] += 1
            continue
        seen_ids.add(row["question_id"])
        candidates.append(row)
    return candidates


def _count_checked(
    proposal: Proposal, scene: Scene, log: GenerationLog
) -> tuple[GeneratedItem | None, str | None]:
    """The item with its count answer checked against the scene, and the correction note; None when rejected."""
    item = proposal.item
    if item.category != "count":
        return item, None
    check = check_count(scene, item.question, item.options, item.answer)
    if check.answer is None:  # rejected
        log.quarantine.add(
            proposal.image_id,
            f"count check: {check.note}",
            source_file=log.source_file,
            payload=item.as_dict(),
        )
        log.stats["count_rejected"] += 1
        return None, None
    if check.note is None:
        return item, None
    log.stats["count_corrected"] += 1
    corrected = GeneratedItem(
        item.question, item.options, check.answer, item.category, item.level, item.rating
    )
    return corrected, check.note


class GenerationTask:
    """Generation for one shard's ``scene_graphs`` rows, as rounds of requests (:mod:`model_clients.rounds`).

    Args:
        rows (`pl.DataFrame`): ``scene_graphs`` rows (one shard, typically).
        settings (`QuestionGenerationSettings`): settings.
        geometry (`Mapping`, *optional*): metric geometry per image id.
        source_file (`str`, *optional*): the scene-graph file, named in quarantine rows.
        generator (`str`, *optional*): ``provider:model`` of the model backend (its rows' ``generator``).
        mode (`str`, *optional*): the client's mode (``auto`` balance: planned in batch mode).
        progress (`bool`, *optional*): progress bars of the template backend.
    """

    def __init__(
        self,
        rows: pl.DataFrame,
        settings: QuestionGenerationSettings,
        geometry: Mapping[str, ImageGeometry] | None = None,
        source_file: str | None = None,
        generator: str = "",
        mode: str = "sync",
        progress: bool = True,
    ) -> None:
        self.rows = rows
        self.settings = settings
        self.log = GenerationLog(QuarantineLog(SOURCE_ASSET), Counter(), source_file)
        self.scenes = read_scenes(rows, geometry, self.log.quarantine, source_file)
        self.progress = progress
        self.model = (
            ModelProposer(settings, generator, settings.planned_balance(mode))
            if settings.calls_model
            else None
        )

    def planned_requests(self) -> tuple[list[LLMRequest], list[LLMRequest]]:
        """Every image's request, and the re-ask of every image at most (for the budget)."""
        if self.model is None:
            return [], []
        balance = self.settings.new_balance()
        return self.model.first_requests(self.scenes, balance), self.model.reask_requests(
            self.scenes, balance
        )

    def rounds(self) -> Rounds[GenerationOutput]:
        """Propose, check and count the candidates (the model backend yields its rounds of requests)."""
        settings, log, scenes, rows = self.settings, self.log, self.scenes, self.rows
        log.stats["images"] = rows.height
        log.stats["images_quarantined"] = rows.height - len(scenes)
        if self.model is not None:
            proposals, generated = yield from self.model.rounds(scenes, settings.new_balance(), log)
            prompt_version = self.model.prompt_version
        else:
            proposer = TemplateProposer(settings, self.progress)
            proposals, generated = proposer.propose(scenes, settings.new_balance(), log)
            prompt_version = proposer.prompt_version
        candidates = _checked_candidates(proposals, scenes, log)
        log.stats["images_without_questions"] = len(scenes) - len({row["image_id"] for row in candidates})
        log.stats["items_without_gt_objects"] = sum(1 for row in candidates if not row["gt_scene"]["objects"])
        frame = (
            pl.DataFrame(candidates, schema=polars_schema(StvqaCandidates))
            if candidates
            else StvqaCandidates.create_empty()
        )
        return GenerationOutput(
            candidates=frame,
            quarantine=log.quarantine,
            prompt_version=prompt_version,
            generated_counts=count_by(generated),
            kept_counts=count_by(candidates),
            stats=dict(log.stats),
        )


def generation_task(
    rows: pl.DataFrame,
    settings: QuestionGenerationSettings,
    geometry: Mapping[str, ImageGeometry] | None,
    client: LLMClient | None,
    source_file: str | None = None,
    progress: bool = True,
) -> GenerationTask:
    """The :class:`GenerationTask` of `rows` for `client` (its provider, model and mode; None: offline).

    >>> generation_task(pl.DataFrame(), QuestionGenerationSettings(backend="anthropic"), None, None)
    Traceback (most recent call last):
    ...
    ValueError: the anthropic backend needs an LLM client (the stvqa_generator_llm resource)
    """
    if settings.calls_model and client is None:
        raise ValueError("the anthropic backend needs an LLM client (the stvqa_generator_llm resource)")
    generator = f"{client.config.provider}:{client.config.model}" if client is not None else ""
    mode = client.config.mode if client is not None else "sync"
    return GenerationTask(rows, settings, geometry, source_file, generator, mode, progress)


def generate_candidates(
    rows: pl.DataFrame,
    settings: QuestionGenerationSettings | None = None,
    geometry: Mapping[str, ImageGeometry] | None = None,
    client: LLMClient | None = None,
    source_file: str | None = None,
    *,
    progress: bool = True,
) -> GenerationOutput:
    """Generate checked candidate questions for ``scene_graphs`` rows (one shard; a stage over many shards runs
    their :class:`GenerationTask` together with :func:`model_clients.rounds.run_rounds`).

    Args:
        rows (`pl.DataFrame`): ``scene_graphs`` rows (one shard, typically).
        settings (`QuestionGenerationSettings`, *optional*): settings; the offline template backend by default.
        geometry (`Mapping[str, dict[str, ObjectGeometry]]`, *optional*): metric geometry per image id.
        client (`LLMClient`, *optional*): required by the ``anthropic`` backend. Its ``max_cost_usd`` is checked
            against every request and re-ask before the first is sent.
        source_file (`str`, *optional*): the scene-graph file, named in quarantine rows.
        progress (`bool`, *optional*, defaults to `True`): progress bars.

    Returns:
        `GenerationOutput`: candidate rows, the quarantine and counts.
    """
    settings = settings or QuestionGenerationSettings()
    task = generation_task(rows, settings, geometry, client, source_file, progress)
    if client is None or not settings.calls_model:
        return run_offline(task.rounds())
    return run_rounds(client, {"": task}, "stvqa generation", progress=progress)[""].value
