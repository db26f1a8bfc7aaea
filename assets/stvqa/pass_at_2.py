"""The pass@2 filter: a strong model answers each candidate; keep it when any try finds the gold letter.

Procedure, per question: up to ``tries_per_round`` tries (2); when none of them is right, one more
round of ``tries_per_round`` tries (2 more); the question is kept when any answer equals the gold
letter. Every attempt is stored (:data:`ATTEMPT_COLUMNS`), so the decision can be audited and
re-thresholded later (for example "at least 2 of 4 right") without paying again; the response cache
makes a rebuild free as well.

Backends, chosen once by the ``backend`` setting (:class:`PassAt2Task`):

- ``openai`` (:class:`ModelAnswerer`; GPT-4o by default, through any OpenAI-compatible server): the image at high detail,
  the question with lettered options, "reply with only the letter". An answer counts only when the
  whole reply is one letter of the options (``"B"``, ``"(B)"``, ``"B."``), never read as ``"A"`` from
  anything else. A reply that is not (truncated, garbage, a sentence) is asked again by the client
  layer like an answer outside a schema (the request's ``answer_check``), and after the re-asks it is an
  ``unparseable`` attempt, quarantined in the response cache rather than cached as a good answer (a
  re-run asks it again with ``requery_quarantined``). Tries are told apart by the request's
  `sample_index`, so each has its own cache entry; sample at a non-zero temperature for tries to differ.
- ``solver`` (:class:`SolverAnswerer`; offline, the default): :func:`~assets.stvqa.templates.solve_question` answers template
  questions from the scene graph. It is deterministic, so it checks consistency rather than
  difficulty: every template question must survive, and a question it cannot read is not kept.

A question whose every attempt failed to get a letter (transport errors, refusals, unparseable replies
after the re-asks, a scene graph that is missing or broken) is quarantined with the reason and how to
ask again, rather than filtered out as answered wrongly.

The work of one shard is a :class:`PassAt2Task` whose rounds (:mod:`model_clients.rounds`) a stage runs together
with those of its other shards: round 1 of every shard is one call, round 2 another, so the stage waits for
batches twice whatever the number of shards.
"""

from __future__ import annotations

import logging
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

import polars as pl
from pydantic import Field
from tqdm.auto import tqdm

from assets.stvqa.geometry import ImageGeometry
from assets.stvqa.prompts import ANSWER_PROMPT_VERSION, ANSWER_TEMPLATE_NAME, render_answer_prompt
from assets.stvqa.scene import Scene, build_scene, scene_graph_problems
from assets.stvqa.templates import solve_question
from data_contracts.quarantine import QuarantineLog
from data_contracts.stvqa_validated import StvqaPassAtTwoAttempts, StvqaValidated
from data_contracts.validation import polars_schema
from model_clients import FailureBudgetSettings, LLMClient, LLMRequest, LLMResult, ResultStatus
from model_clients.rounds import RequestRound, Rounds, run_offline, run_rounds

logger = logging.getLogger(__name__)

SOURCE_ASSET = "stvqa_validated"
RESOURCE_KEY = "stvqa_judge_llm"
"""The Dagster resource of the ``openai`` backend's client."""
SOLVER_MODEL = "scene-graph-solver"
ANSWER_MAX_TOKENS = 5
"""Completion limit of an answer: one letter."""
_LETTER_REPLY = re.compile(r"^[\s*_`\"']*\(?\s*([A-Da-d])\s*\)?[.:]?[\s*_`\"']*$")

ATTEMPT_STATUSES = ("answered", "unparseable", "abstained", "error")
"""``answered``: a letter; ``unparseable``: a reply that is not one letter of the options, even after the
re-asks; ``abstained``: the solver could not read or settle the question; ``error``: no reply (transport
failure, refusal)."""
NO_ANSWER_STATUSES = ("unparseable", "error")
"""Attempts that got no letter from the model: a question with only these is quarantined, not filtered."""


class PassAt2Settings(FailureBudgetSettings):
    """Settings of the pass@2 filter; the ``stvqa_validated`` run config extends this model.

    The fields are run configuration; the ``ClassVar`` attributes (tries per round, rounds, the answers'
    temperature) define pass@2 and are constants of the method, not run configuration.

    >>> PassAt2Settings(backend="openai").calls_model
    True
    """

    backend: Literal["solver", "openai"] = Field(
        default="solver",
        description="'solver' (offline scene-graph solver) or 'openai' (the stvqa_judge_llm resource).",
    )
    image_detail: Literal["low", "high", "auto"] = Field(
        default="high", description="OpenAI image detail of the answering calls."
    )

    # Constants of the method, pass@2: 2 tries, then 2 more (not run configuration; a test may override them in
    # a subclass).
    tries_per_round: ClassVar[int] = 2
    """Answers asked per round."""
    rounds: ClassVar[int] = 2
    """Rounds; later rounds only for questions no try got right."""
    temperature: ClassVar[float] = 1.0
    """Sampling temperature of an answer (tries should differ)."""

    @property
    def calls_model(self) -> bool:
        """True when the backend calls a model (it then needs an LLM client)."""
        return self.backend == "openai"


@dataclass
class PassAtTwoOutput:
    """What the filter produced.

    Attributes:
        validated (`pl.DataFrame`): kept questions (``stvqa_validated`` contract).
        attempts (`pl.DataFrame`): every attempt for every question (``stvqa_pass_at_2_attempts``).
        quarantine (`QuarantineLog`): questions that could not be answered at all, with the reason.
        stats (`dict`): candidates, kept, filtered out, quarantined, retention, attempts by status.
    """

    validated: pl.DataFrame
    attempts: pl.DataFrame
    quarantine: QuarantineLog
    stats: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class _Attempt:
    letter: str | None
    status: str
    raw_text: str | None = None
    error: str | None = None
    cached: bool = False
    cost_usd: float = 0.0


def parse_answer_letter(text: str | None, option_count: int) -> str | None:
    """The letter of a reply that is exactly one option letter (bold, quotes or brackets allowed).

    >>> parse_answer_letter("B", 4), parse_answer_letter("(c).", 4), parse_answer_letter("**A**", 2)
    ('B', 'C', 'A')
    >>> parse_answer_letter("A bit to the left", 4), parse_answer_letter("D", 3), parse_answer_letter(None, 2)
    (None, None, None)
    """
    if text is None:
        return None
    match = _LETTER_REPLY.match(text.strip())
    if match is None:
        return None
    letter = match.group(1).upper()
    return letter if "ABCD".index(letter) < option_count else None


def letter_check(option_count: int):
    """The judge requests' ``answer_check``: why a reply is not one option letter, or None.

    >>> check = letter_check(3)
    >>> check("(B)") is None, check("The answer is")
    (True, "reply is not one option letter (A-C): 'The answer is'")
    """
    last = "ABCD"[option_count - 1]

    def check(text: Any) -> str | None:
        if isinstance(text, str) and parse_answer_letter(text, option_count) is not None:
            return None
        return f"reply is not one option letter (A-{last}): {str(text)[:80]!r}"

    return check


def _attempt_from_result(result: LLMResult, option_count: int) -> _Attempt:
    if not result.ok:
        status = "unparseable" if result.status == ResultStatus.INVALID_RESPONSE else "error"
        error = f"{result.status}: {result.error}{result.rerun_hint(RESOURCE_KEY)}"
        return _Attempt(None, status, result.raw_text, error, result.cached, result.cost_usd)
    text = result.data if isinstance(result.data, str) else result.raw_text
    letter = parse_answer_letter(text, option_count)
    return _Attempt(
        letter, "answered" if letter else "unparseable", result.raw_text, None, result.cached, result.cost_usd
    )


class SolverAnswerer:
    """The offline backend: :func:`~assets.stvqa.templates.solve_question` on the scene graph.

    Deterministic, so every try of a round gets the same attempt.
    """

    model = SOLVER_MODEL

    def __init__(self, scenes: Mapping[str, Scene], progress: bool = True) -> None:
        self.scenes = scenes
        self.progress = progress

    def answer(
        self, rows: Sequence[Mapping[str, Any]], try_indices: range, round_number: int
    ) -> list[list[_Attempt]]:
        """The solver's answer to each row, repeated for every try."""
        answered = []
        for row in tqdm(
            rows,
            desc=f"pass@2 solver round {round_number}",
            unit="q",
            disable=not self.progress,
            mininterval=1.0,
        ):
            answer = solve_question(self.scenes[row["image_id"]], row["question"], row["options"])
            attempt = _Attempt(
                answer.letter,
                "answered" if answer.letter else "abstained",
                answer.letter,
                None if answer.letter else answer.reason,
            )
            answered.append([attempt] * len(try_indices))
        return answered


def answer_request(
    row: Mapping[str, Any], image: bytes, settings: PassAt2Settings, try_index: int
) -> LLMRequest:
    """The request of one try at one candidate (tries are told apart by ``sample_index``)."""
    return LLMRequest(
        template_name=ANSWER_TEMPLATE_NAME,
        template_version=ANSWER_PROMPT_VERSION,
        prompt=render_answer_prompt(row["question"], row["options"]),
        images=(image,),
        parameters={
            "temperature": settings.temperature,
            "max_tokens": ANSWER_MAX_TOKENS,
            "image_detail": settings.image_detail,
        },
        sample_index=try_index,
        request_id=row["question_id"],
        answer_check=letter_check(len(row["options"])),
    )


class ModelAnswerer:
    """The model-calling backend: the image and the lettered question, asked in rounds of requests.

    Tries are told apart by the request's ``sample_index`` (the try index), so each has its own cache entry.
    """

    def __init__(self, model: str, images: Mapping[str, bytes], settings: PassAt2Settings) -> None:
        self.model = model
        self.images = images
        self.settings = settings

    def requests(self, rows: Sequence[Mapping[str, Any]], try_indices: range) -> list[LLMRequest]:
        """Every try of every row."""
        return [
            answer_request(row, self.images[row["image_id"]], self.settings, try_index)
            for row in rows
            for try_index in try_indices
        ]

    def attempts(
        self, rows: Sequence[Mapping[str, Any]], try_indices: range, results: Sequence[LLMResult]
    ) -> list[list[_Attempt]]:
        """The attempts of :meth:`requests`' results; replies that are not one option letter are unparseable."""
        answers = iter(results)
        return [
            [_attempt_from_result(next(answers), len(row["options"])) for _ in try_indices] for row in rows
        ]


def load_scenes(
    scene_rows: pl.DataFrame, geometry: Mapping[str, ImageGeometry] | None
) -> tuple[dict[str, Scene], dict[str, bytes], dict[str, str]]:
    """Scenes and image bytes per image id, and the reason for every image that cannot be used."""
    scenes: dict[str, Scene] = {}
    images: dict[str, bytes] = {}
    problems: dict[str, str] = {}
    geometry = geometry or {}
    for row in scene_rows.iter_rows(named=True):
        image_id = str(row["image_id"])
        found = scene_graph_problems(row)
        if found:
            problems[image_id] = "bad scene graph: " + "; ".join(found)
            continue
        scenes[image_id] = build_scene(row, geometry.get(image_id))
        images[image_id] = bytes(row["image"]["bytes"])
    return scenes, images, problems


_Tried = list[tuple[int, _Attempt]]
"""The attempts of one question: (try index, attempt) in the order they were made."""


def _answerable(
    rows: Sequence[Mapping[str, Any]],
    scenes: Mapping[str, Scene],
    scene_problems: Mapping[str, str],
    quarantine: QuarantineLog,
) -> list[Mapping[str, Any]]:
    """The rows whose scene graph is usable; the others are quarantined with the reason."""
    answerable = []
    for row in rows:
        problem = scene_problems.get(row["image_id"])
        if problem is None and row["image_id"] not in scenes:
            problem = "scene graph of the image is missing from scene_graphs"
        if problem is not None:
            quarantine.add(
                row["question_id"], f"pass@2 cannot run: {problem}", payload={"image_id": row["image_id"]}
            )
        else:
            answerable.append(row)
    return answerable


def _answer_in_rounds(
    rows: Sequence[Mapping[str, Any]], answerer: SolverAnswerer | ModelAnswerer, settings: PassAt2Settings
) -> Rounds[dict[str, _Tried]]:
    """Every question's attempts; a round only asks the questions no earlier try got right (the model backend
    yields each round's requests)."""
    attempts: dict[str, _Tried] = {row["question_id"]: [] for row in rows}
    pending = list(rows)
    for round_index in range(settings.rounds):
        if not pending:
            break
        try_indices = range(
            round_index * settings.tries_per_round, (round_index + 1) * settings.tries_per_round
        )
        if isinstance(answerer, ModelAnswerer):
            results = yield RequestRound(
                f"pass@2 round {round_index + 1}", answerer.requests(pending, try_indices)
            )
            answered = answerer.attempts(pending, try_indices, results)
        else:
            answered = answerer.answer(pending, try_indices, round_index + 1)
        for row, row_attempts in zip(pending, answered, strict=True):
            attempts[row["question_id"]].extend(zip(try_indices, row_attempts, strict=True))
        pending = [
            row
            for row in pending
            if not any(attempt.letter == row["answer"] for _, attempt in attempts[row["question_id"]])
        ]
    return attempts


def _attempt_row(
    row: Mapping[str, Any], try_index: int, attempt: _Attempt, settings: PassAt2Settings, model: str
) -> dict[str, Any]:
    return {
        "question_id": row["question_id"],
        "image_id": row["image_id"],
        "shard": row["shard"],
        "category": row["category"],
        "level": row["level"],
        "attempt": try_index + 1,
        "round": try_index // settings.tries_per_round + 1,
        "backend": settings.backend,
        "model": model,
        "gold": row["answer"],
        "answer": attempt.letter,
        "correct": attempt.letter == row["answer"],
        "status": attempt.status,
        "raw_text": attempt.raw_text,
        "error": attempt.error,
        "cached": attempt.cached,
        "cost_usd": float(attempt.cost_usd),
    }


def _validated_row(
    row: Mapping[str, Any],
    columns: Sequence[str],
    tried: _Tried,
    correct: list[int],
    settings: PassAt2Settings,
    model: str,
) -> dict[str, Any]:
    return {
        **{name: row[name] for name in columns},
        "pass_at_2_backend": settings.backend,
        "pass_at_2_model": model,
        "pass_at_2_attempts": len(tried),
        "pass_at_2_correct": len(correct),
        "first_correct_attempt": correct[0],
        "attempt_answers": [attempt.letter or "" for _, attempt in tried],
    }


class PassAt2Task:
    """pass@2 for one shard's candidates, as rounds of requests (:mod:`model_clients.rounds`).

    Args:
        candidates (`pl.DataFrame`): ``stvqa_candidates`` rows.
        scene_rows (`pl.DataFrame`): ``scene_graphs`` rows of their images (images for the model, graphs for the
            solver).
        settings (`PassAt2Settings`): settings.
        geometry (`Mapping`, *optional*): metric geometry per image id (the solver needs what the templates used).
        model (`str`, *optional*): ``provider:model`` of the model backend (the attempts' ``model``).
        progress (`bool`, *optional*): progress bars of the solver.
    """

    def __init__(
        self,
        candidates: pl.DataFrame,
        scene_rows: pl.DataFrame,
        settings: PassAt2Settings,
        geometry: Mapping[str, ImageGeometry] | None = None,
        model: str = "",
        progress: bool = True,
    ) -> None:
        self.candidates = candidates
        self.settings = settings
        scenes, images, scene_problems = load_scenes(scene_rows, geometry)
        self.answerer: SolverAnswerer | ModelAnswerer = (
            ModelAnswerer(model, images, settings)
            if settings.calls_model
            else SolverAnswerer(scenes, progress)
        )
        self.quarantine = QuarantineLog(SOURCE_ASSET)
        self.rows = list(candidates.iter_rows(named=True))
        self.answerable = _answerable(self.rows, scenes, scene_problems, self.quarantine)

    def planned_requests(self) -> tuple[list[LLMRequest], list[LLMRequest]]:
        """The first round's tries of every question, and the later rounds' tries of every question at most."""
        if not isinstance(self.answerer, ModelAnswerer):
            return [], []
        per_round = self.settings.tries_per_round
        first = self.answerer.requests(self.answerable, range(per_round))
        later = self.answerer.requests(self.answerable, range(per_round, per_round * self.settings.rounds))
        return first, later

    def rounds(self) -> Rounds[PassAtTwoOutput]:
        """Answer every candidate in rounds and keep those answered right once."""
        attempts = yield from _answer_in_rounds(self.answerable, self.answerer, self.settings)
        return _pass_at_2_output(
            self.candidates,
            self.rows,
            self.answerable,
            attempts,
            self.quarantine,
            self.settings,
            self.answerer.model,
        )


def _pass_at_2_output(
    candidates: pl.DataFrame,
    rows: Sequence[Mapping[str, Any]],
    answerable: Sequence[Mapping[str, Any]],
    attempts: Mapping[str, _Tried],
    quarantine: QuarantineLog,
    settings: PassAt2Settings,
    model: str,
) -> PassAtTwoOutput:
    """The kept questions, every attempt, the quarantine and the counts."""
    validated_rows, attempt_rows = [], []
    statuses: Counter = Counter()
    kept = filtered = 0
    for row in answerable:
        tried = attempts[row["question_id"]]
        for try_index, attempt in tried:
            statuses[attempt.status] += 1
            attempt_rows.append(_attempt_row(row, try_index, attempt, settings, model))
        if all(attempt.status in NO_ANSWER_STATUSES for _, attempt in tried):
            last_error = tried[-1][1].error if tried else "no attempt was made"
            quarantine.add(
                row["question_id"],
                f"pass@2 got no answer in {len(tried)} attempts: {last_error}",
                payload={"image_id": row["image_id"], "question": row["question"]},
            )
            continue
        correct = [try_index + 1 for try_index, attempt in tried if attempt.letter == row["answer"]]
        if not correct:
            filtered += 1
            continue
        kept += 1
        validated_rows.append(_validated_row(row, candidates.columns, tried, correct, settings, model))
    validated = (
        pl.DataFrame(validated_rows, schema=polars_schema(StvqaValidated))
        if validated_rows
        else StvqaValidated.create_empty()
    )
    attempt_frame = (
        pl.DataFrame(attempt_rows, schema=polars_schema(StvqaPassAtTwoAttempts))
        if attempt_rows
        else StvqaPassAtTwoAttempts.create_empty()
    )
    decided = kept + filtered
    retention = round(kept / decided, 4) if decided else 0.0
    stats = {
        "candidates": len(rows),
        "kept": kept,
        "filtered_out": filtered,
        "quarantined": len(quarantine),
        "retention": retention,
        "attempts": len(attempt_rows),
        "attempts_by_status": dict(sorted(statuses.items())),
    }
    logger.info(
        "pass@2 (%s): %d of %d kept (retention %.1f%%), %d quarantined",
        model,
        kept,
        decided,
        100 * retention,
        len(quarantine),
    )
    return PassAtTwoOutput(validated=validated, attempts=attempt_frame, quarantine=quarantine, stats=stats)


def pass_at_2_task(
    candidates: pl.DataFrame,
    scene_rows: pl.DataFrame,
    settings: PassAt2Settings,
    geometry: Mapping[str, ImageGeometry] | None,
    client: LLMClient | None,
    progress: bool = True,
) -> PassAt2Task:
    """The :class:`PassAt2Task` of `candidates` for `client` (its provider and model; None: the solver).

    >>> pass_at_2_task(pl.DataFrame(), pl.DataFrame(), PassAt2Settings(backend="openai"), None, None)
    Traceback (most recent call last):
    ...
    ValueError: the openai backend needs an LLM client (the stvqa_judge_llm resource)
    """
    if settings.calls_model and client is None:
        raise ValueError("the openai backend needs an LLM client (the stvqa_judge_llm resource)")
    model = f"{client.config.provider}:{client.config.model}" if client is not None else ""
    return PassAt2Task(candidates, scene_rows, settings, geometry, model, progress)


def run_pass_at_2(
    candidates: pl.DataFrame,
    scene_rows: pl.DataFrame,
    settings: PassAt2Settings | None = None,
    geometry: Mapping[str, ImageGeometry] | None = None,
    client: LLMClient | None = None,
    *,
    progress: bool = True,
) -> PassAtTwoOutput:
    """Answer every candidate up to ``tries_per_round x rounds`` times and keep those answered right once (one
    shard; a stage over many shards runs their :class:`PassAt2Task` together with
    :func:`model_clients.rounds.run_rounds`).

    Args:
        candidates (`pl.DataFrame`): ``stvqa_candidates`` rows.
        scene_rows (`pl.DataFrame`): ``scene_graphs`` rows of their images (images for the model, graphs for
            the solver).
        settings (`PassAt2Settings`, *optional*): settings; the offline solver by default.
        geometry (`Mapping`, *optional*): metric geometry per image id (the solver needs what the templates used).
        client (`LLMClient`, *optional*): required by the ``openai`` backend. Its ``max_cost_usd`` is checked against
            every round (the second for every question) before the first request is sent.
        progress (`bool`, *optional*, defaults to `True`): progress bars.

    Returns:
        `PassAtTwoOutput`.
    """
    settings = settings or PassAt2Settings()
    task = pass_at_2_task(candidates, scene_rows, settings, geometry, client, progress)
    if client is None or not settings.calls_model:
        return run_offline(task.rounds())
    return run_rounds(client, {"": task}, "pass@2", progress=progress)[""].value


def rethreshold(
    attempts: pl.DataFrame, min_correct: int = 1, max_attempts: int | None = None
) -> pl.DataFrame:
    """Re-decide from stored attempts: question ids with at least `min_correct` right answers among their
    first `max_attempts` attempts (all when `None`). No model is called.

    >>> frame = pl.DataFrame({"question_id": ["q", "q", "r"], "attempt": [1, 2, 1], "correct": [True, True, False]})
    >>> rethreshold(frame, min_correct=2)["question_id"].to_list()
    ['q']
    """
    selected = attempts if max_attempts is None else attempts.filter(pl.col("attempt") <= max_attempts)
    return (
        selected.group_by("question_id")
        .agg(pl.col("correct").sum().alias("correct_answers"), pl.len().alias("attempts"))
        .filter(pl.col("correct_answers") >= min_correct)
        .sort("question_id")
    )
