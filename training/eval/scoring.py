"""Strict scoring: answers are read with the rewards' own grammar, and nothing is ever guessed.

Per output format (the ``prompt_format`` the model was asked to follow); the accepted and rejected
forms of each grammar are tabled in ``training/rewards/README.md`` and are the same for the training
rewards and for this evaluator:

* ``spatialcore``: :func:`~training.rewards.parsing.parse_spatialcore`; one option letter (either case)
  alone after the single ``</think>`` (:func:`~training.rewards.parsing.read_spatialcore_answer`).
* ``spatialthinker``: :func:`~training.rewards.parsing.parse_spatialthinker`; the ``<answer>`` names the
  gold option: ``"(C)"``, ``"C"``, ``"C."``, ``"C)"``, optionally followed by that option's text
  (:func:`~training.rewards.spatialthinker.answer_matches`, the reward's own function).
* ``dge``: :func:`~training.rewards.dge.score_dge`; an option letter in the same ``<answer>`` grammar,
  or a number with its unit scored by mean relative accuracy (numeric items are always asked in this
  format).

Outcomes (``status``): ``correct``; ``wrong`` (an answer of the expected form that is not the gold
one); ``unparseable`` (no answer of the expected form: a missing closing tag, prose, a bare refusal,
a letter beyond the options); ``truncated`` (the backend stopped at the token limit,
``finish_reason`` ``length``: such a completion did not finish and has no answer, whatever it
contains); ``error`` (the request failed: no completion). Everything but ``correct`` and partial
numeric credit scores 0, and the unparseable, truncated and failed predictions are counted separately
in the reports.

What this module never does (each was a bug of a public reference evaluator): count an unparseable
answer as "A" or as any other letter; read a digit or a letter inside option text ("0.9 m", "a bit
right") as an answer; read the gold answer back out of option text (gold comes from the index);
credit a truncated completion.

Grouped metrics, as 3DSRBench's own scoring defines them (its VLMEvalKit TSV names the variants of a
question ``<qid>``, ``<qid>-N``, ``<qid>-flip``, ``<qid>-flip-N``):

* CircularEval (:func:`circular_scores`): the official script strips the rotation suffix ``-N`` and
  requires every row of the resulting group to be right, so a question and its flipped counterpart
  are two questions, each counting once.
* FlipEval (:func:`flip_scores`): a question counts only if every rotation of the question and every
  rotation of its flipped counterpart are right (a question without a flipped counterpart: every
  rotation of its own).

>>> item = {"options": ["left", "right"], "answer": "B", "answer_index": 1, "answer_format": "choice"}
>>> score_prediction(item, "boxes...</think>B", "spatialcore").status
'correct'
>>> score_prediction(item, "boxes...</think>B", "spatialcore", finish_reason="length").status
'truncated'
>>> score_prediction(item, "boxes... the answer is probably B", "spatialcore").status
'unparseable'
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from typing import Any, cast

import polars as pl

from training.rewards.dge import score_dge
from training.rewards.parsing import (
    is_allowed_letter,
    parse_spatialcore,
    parse_spatialthinker,
    parse_think_answer,
    read_choice_answer,
)
from training.rewards.spatialthinker import answer_matches

logger = logging.getLogger(__name__)

OUTPUT_FORMATS = ("spatialcore", "spatialthinker", "dge")
LENGTH_FINISH_REASONS = frozenset({"length", "max_tokens"})
LETTERS = "ABCDEFGH"


@dataclass(frozen=True)
class ScoredPrediction:
    """The strict reading of one completion.

    Attributes:
        status: ``correct``, ``wrong``, ``unparseable``, ``truncated`` or ``error``.
        score: 1/0 for multiple choice, mean relative accuracy for numeric items; 0 unless an answer was read.
        predicted: the letter read, or the number read (converted to the item's unit) as text.
        problems: why the completion is malformed (from the parser).
    """

    status: str
    score: float
    predicted: str | None
    problems: tuple[str, ...] = ()


def output_format_for(item: dict, prompt_format: str) -> str:
    """The output format an item is asked and scored in: numeric items always use ``dge``.

    >>> output_format_for({"answer_format": "numeric"}, "spatialcore"), output_format_for({"answer_format": "choice"}, "spatialcore")
    ('dge', 'spatialcore')
    """
    if prompt_format not in OUTPUT_FORMATS:
        raise ValueError(
            f"unknown output format {prompt_format!r}; expected one of {', '.join(OUTPUT_FORMATS)}"
        )
    return "dge" if item.get("answer_format") == "numeric" else prompt_format


def gold_letter(item: dict) -> str:
    """The gold letter, from the integer index (never from option text).

    >>> gold_letter({"answer_index": 2, "answer": "C"})
    'C'
    """
    index = item.get("answer_index")
    if index is None:
        raise ValueError(f"item {item.get('item_id')!r} is not multiple choice")
    letter = LETTERS[int(index)]
    if item.get("answer") not in (None, letter):
        raise ValueError(
            f"item {item.get('item_id')!r}: gold letter {item.get('answer')!r} disagrees with index {index}"
        )
    return letter


def gold_option_text(item: dict) -> str:
    """The gold ``"(X) option text"`` SpatialThinker answers are compared with (``"(X)"`` without options).

    >>> gold_option_text({"answer_index": 1, "options": ["left", "right"]})
    '(B) right'
    """
    letter = gold_letter(item)
    options = list(item.get("options") or [])
    return f"({letter}) {options[int(item['answer_index'])]}" if options else f"({letter})"


def _option_count(item: dict) -> int:
    return len(item.get("options") or [])


def score_prediction(
    item: dict, completion: str | None, prompt_format: str, finish_reason: str | None = None
) -> ScoredPrediction:
    """Score one completion of one item strictly.

    Args:
        item (`dict`): an ``eval_items`` row (``options``, ``answer_index``, ``answer``, ``answer_format``,
            ``numeric_answer``, ``unit``).
        completion (`str` or `None`): the completion text; ``None`` when the backend returned nothing.
        prompt_format (`str`): the format the model was asked to follow (``spatialcore``,
            ``spatialthinker``); numeric items are always ``dge``.
        finish_reason (`str`, *optional*): why generation stopped, as the backend reported it;
            ``"length"`` (or Anthropic's ``"max_tokens"``) means the token limit cut it: truncated.

    Returns:
        [`ScoredPrediction`]

    >>> numeric = {"answer_format": "numeric", "numeric_answer": 2.0, "unit": "m", "answer": "2.0", "options": []}
    >>> scored = score_prediction(numeric, "<think>..</think><answer>210 cm</answer>", "spatialcore")
    >>> scored.status, scored.score, scored.predicted
    ('wrong', 0.9, '2.1')
    """
    if completion is None:
        return ScoredPrediction("error", 0.0, None, ("no completion",))
    output_format = output_format_for(item, prompt_format)
    if finish_reason in LENGTH_FINISH_REASONS:
        return ScoredPrediction("truncated", 0.0, None, ("token limit reached",))
    if output_format == "spatialcore":
        return _score_spatialcore(item, completion)
    if output_format == "spatialthinker":
        return _score_spatialthinker(item, completion)
    return _score_dge(item, completion)


def _judged(correct: bool, letter: str, problems: tuple[str, ...]) -> ScoredPrediction:
    return ScoredPrediction("correct" if correct else "wrong", 1.0 if correct else 0.0, letter, problems)


def _score_spatialcore(item: dict, completion: str) -> ScoredPrediction:
    parse = parse_spatialcore(completion)
    letter = parse.answer_letter
    if not is_allowed_letter(letter, _option_count(item)):
        problems = parse.problems or (f"letter {letter} is beyond the options",)
        return ScoredPrediction("unparseable", 0.0, None, problems)
    return _judged(letter == gold_letter(item), letter, parse.problems)


def _score_spatialthinker(item: dict, completion: str) -> ScoredPrediction:
    parse = parse_spatialthinker(completion)
    read = read_choice_answer(parse.answer_text)
    if read is None or not is_allowed_letter(read.letter, _option_count(item)):
        problems = parse.problems or ("the <answer> is not an option letter of the grammar",)
        return ScoredPrediction("unparseable", 0.0, None, problems)
    # The reward's own comparison: the letter, and the option text when one follows it (options drawn
    # in the image have no text to compare: the letter decides).
    return _judged(answer_matches(parse.answer_text, gold_option_text(item)), read.letter, parse.problems)


def _score_dge(item: dict, completion: str) -> ScoredPrediction:
    parse = parse_think_answer(completion)
    if parse.answer_text is None:
        return ScoredPrediction("unparseable", 0.0, None, parse.problems)
    score = score_dge(
        completion,
        answer=item.get("answer"),
        options=list(item.get("options") or []),
        numeric_answer=item.get("numeric_answer"),
        unit=item.get("unit"),
        task_type=item.get("task_type"),
    )
    if not score.has_answer:
        return ScoredPrediction("unparseable", 0.0, None, score.problems)
    if score.kind == "choice":
        predicted = score.predicted_letter
    else:
        predicted = f"{score.predicted_value:.6g}" if score.predicted_value is not None else None
    status = "correct" if score.accuracy >= 1.0 else "wrong"
    return ScoredPrediction(status, float(score.accuracy), predicted, score.problems)


# --------------------------------------------------------------------------------------------------
# Aggregates
# --------------------------------------------------------------------------------------------------


def accuracy_summary(scores: pl.DataFrame) -> dict[str, Any]:
    """Counts and the mean score (in %) of a frame of scored predictions (``status``, ``score``).

    >>> import polars as pl
    >>> frame = pl.DataFrame({"status": ["correct", "wrong", "unparseable", "truncated"], "score": [1.0, 0.0, 0.0, 0.0]})
    >>> accuracy_summary(frame)
    {'n': 4, 'accuracy': 25.0, 'correct': 1, 'wrong': 1, 'unparseable': 1, 'truncated': 1, 'error': 0}
    """
    n = scores.height
    counts = dict(scores.group_by("status").len().iter_rows()) if n else {}
    return {
        "n": n,
        "accuracy": float(cast(float, scores["score"].mean()) * 100.0) if n else math.nan,  # a float column
        **{
            status: int(counts.get(status, 0))
            for status in ("correct", "wrong", "unparseable", "truncated", "error")
        },
    }


def circular_scores(scores: pl.DataFrame) -> pl.DataFrame:
    """CircularEval: one row per question whose score is 1 only if every rotation of it is correct.

    A question is ``(question_key, flipped)``: 3DSRBench's scoring script strips only the rotation
    suffix ``-N`` of the qid, so a flipped question (``<qid>-flip``, ``<qid>-flip-N``) is a question of
    its own. Expects ``benchmark, question_key, flipped, circular_index, status`` plus any
    constant-per-question columns to keep (``category``, ``task_type``, ``source``, ``run_name``...).
    A rotation that is unparseable, truncated or failed fails the whole question. Questions without
    rotations keep their single score.
    """
    keys: list[str] = [
        column for column in ("run_name", "benchmark", "question_key", "flipped") if column in scores.columns
    ]
    return _group_all_correct(scores, keys)


def flip_scores(scores: pl.DataFrame) -> pl.DataFrame:
    """FlipEval: one row per question, right only if every rotation of it and of its flipped counterpart is.

    A question without a flipped counterpart counts with its own rotations only.
    """
    keys: list[str] = [
        column for column in ("run_name", "benchmark", "question_key") if column in scores.columns
    ]
    return _group_all_correct(scores, keys)


def _group_all_correct(scores: pl.DataFrame, keys: list[str]) -> pl.DataFrame:
    if scores.height == 0:
        return scores.select([*keys, "score"]) if all(k in scores.columns for k in keys) else scores
    carried = [c for c in ("category", "task_type", "source") if c in scores.columns and c not in keys]
    return scores.group_by(keys, maintain_order=True).agg(
        (pl.col("status") == "correct").all().cast(pl.Float64).alias("score"),
        pl.when((pl.col("status") == "correct").all())
        .then(pl.lit("correct"))
        .when((pl.col("status") == "error").any())
        .then(pl.lit("error"))
        .when((pl.col("status") == "truncated").any())
        .then(pl.lit("truncated"))
        .when((pl.col("status") == "unparseable").any())
        .then(pl.lit("unparseable"))
        .otherwise(pl.lit("wrong"))
        .alias("status"),
        pl.len().alias("variants"),
        *[pl.col(column).first() for column in carried],
    )


def has_circular_variants(scores: pl.DataFrame) -> bool:
    """Whether any question of the frame has rotated variants."""
    return scores.height > 0 and bool((scores["circular_index"] > 0).any())


def has_flip_variants(scores: pl.DataFrame) -> bool:
    """Whether any question of the frame has a flipped variant."""
    return scores.height > 0 and bool(scores["flipped"].any())
