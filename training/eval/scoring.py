"""Strict scoring: answers are read with the rewards' own parsers, and nothing is ever guessed.

Per output format (the ``prompt_format`` the model was asked to follow):

* ``spatialcore``: :func:`~training.rewards.parsing.parse_spatialcore`; the letter after the single
  ``</think>`` (``"B"``, ``"(B)"``, ``"B. text"``). A completion without ``</think>`` did not finish.
* ``spatialthinker``: :func:`~training.rewards.parsing.parse_spatialthinker`; the ``<answer>`` must equal
  the gold ``"(X) option text"`` or be its bare letter (:func:`~training.rewards.spatialthinker.answer_matches`,
  as in the reward). A completion without a closed ``<answer>`` did not finish.
* ``dge``: :func:`~training.rewards.dge.score_dge`; an option letter, or a number with its unit scored
  by mean relative accuracy (numeric items are always asked in this format).

Outcomes (``status``): ``correct``; ``wrong``; ``unparseable`` (no answer of the expected form, or a
letter beyond the options); ``truncated`` (the token limit was hit or the closing tag is missing:
a completion that did not finish has no answer, whatever it contains); ``error`` (no completion).
Everything but ``correct`` and partial numeric credit scores 0, and the unparseable, truncated and
failed predictions are counted separately in the reports.

What this module never does (each was a bug of a public reference evaluator): count an unparseable
answer as "A" or as any other letter; read a digit or a letter inside option text ("0.9 m", "a bit
right") as an answer; read the gold answer back out of option text (gold comes from the index);
credit a truncated completion.

Grouped metrics: CircularEval (every rotation of the options answered correctly) and FlipEval (the
original and the horizontally flipped image both answered correctly), as 3DSRBench defines them.

>>> item = {"options": ["left", "right"], "answer": "B", "answer_index": 1, "answer_format": "choice"}
>>> score_prediction(item, "boxes...</think>B", "spatialcore").status
'correct'
>>> score_prediction(item, "boxes... the answer is probably B", "spatialcore").status
'truncated'
>>> score_prediction(item, "boxes...</think>I am not sure", "spatialcore").status
'unparseable'
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from typing import Any

import polars as pl

from training.rewards.dge import score_dge
from training.rewards.parsing import (
    is_allowed_letter,
    parse_option_letter,
    parse_spatialcore,
    parse_spatialthinker,
    parse_think_answer,
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
        finish_reason (`str`, *optional*): why generation stopped; ``"length"`` means truncated.

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
    hit_limit = finish_reason in LENGTH_FINISH_REASONS
    if output_format == "spatialcore":
        return _score_spatialcore(item, completion, hit_limit)
    if output_format == "spatialthinker":
        return _score_spatialthinker(item, completion, hit_limit)
    return _score_dge(item, completion, hit_limit)


def _score_spatialcore(item: dict, completion: str, hit_limit: bool) -> ScoredPrediction:
    parse = parse_spatialcore(completion)
    if hit_limit or parse.truncated:
        return ScoredPrediction("truncated", 0.0, None, parse.problems or ("token limit reached",))
    letter = parse.answer_letter
    if not is_allowed_letter(letter, _option_count(item)):
        return ScoredPrediction("unparseable", 0.0, None, parse.problems)
    correct = letter == gold_letter(item)
    return ScoredPrediction(
        "correct" if correct else "wrong", 1.0 if correct else 0.0, letter, parse.problems
    )


def _score_spatialthinker(item: dict, completion: str, hit_limit: bool) -> ScoredPrediction:
    parse = parse_spatialthinker(completion)
    if hit_limit or parse.answer_text is None:
        status = "truncated" if hit_limit or "</answer>" not in parse.text else "unparseable"
        return ScoredPrediction(status, 0.0, None, parse.problems)
    letter = parse_option_letter(parse.answer_text)
    if not is_allowed_letter(letter, _option_count(item)):
        return ScoredPrediction("unparseable", 0.0, None, parse.problems)
    if item.get("options"):
        correct = answer_matches(parse.answer_text, gold_option_text(item))
    else:
        # Options drawn in the image: there is no option text to compare, only the letter.
        correct = letter == gold_letter(item)
    return ScoredPrediction(
        "correct" if correct else "wrong", 1.0 if correct else 0.0, letter, parse.problems
    )


def _score_dge(item: dict, completion: str, hit_limit: bool) -> ScoredPrediction:
    if hit_limit:
        return ScoredPrediction("truncated", 0.0, None, ("token limit reached",))
    parse = parse_think_answer(completion)
    if parse.answer_text is None:
        status = "truncated" if "</answer>" not in completion else "unparseable"
        return ScoredPrediction(status, 0.0, None, parse.problems)
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
        "accuracy": float(scores["score"].mean() * 100.0) if n else math.nan,
        **{
            status: int(counts.get(status, 0))
            for status in ("correct", "wrong", "unparseable", "truncated", "error")
        },
    }


def circular_scores(scores: pl.DataFrame) -> pl.DataFrame:
    """CircularEval: one row per (question, flipped) whose score is 1 only if every rotation is correct.

    Expects ``benchmark, question_key, flipped, circular_index, score`` plus any constant-per-question
    columns to keep (``category``, ``task_type``, ``source``, ``run_name``...). A rotation that is
    unparseable or truncated fails the whole group. Groups without rotations keep their single score.
    """
    keys = [
        column for column in ("run_name", "benchmark", "question_key", "flipped") if column in scores.columns
    ]
    return _group_all_correct(scores, keys)


def flip_scores(scores: pl.DataFrame) -> pl.DataFrame:
    """FlipEval: one row per (question, rotation) that is right only if the original and flipped items both are.

    Only questions that have a flipped variant are kept (3DSRBench's definition compares pairs).
    """
    keys = [
        column
        for column in ("run_name", "benchmark", "question_key", "circular_index")
        if column in scores.columns
    ]
    paired = scores.filter(pl.col("flipped").any().over(keys) & (~pl.col("flipped")).any().over(keys))
    return _group_all_correct(paired, keys)


def flip_circular_scores(scores: pl.DataFrame) -> pl.DataFrame:
    """Both at once: a question counts only if every rotation of the original and of the flipped image is right."""
    keys = [column for column in ("run_name", "benchmark", "question_key") if column in scores.columns]
    paired = scores.filter(pl.col("flipped").any().over(keys) & (~pl.col("flipped")).any().over(keys))
    return _group_all_correct(paired, keys)


def _group_all_correct(scores: pl.DataFrame, keys: list[str]) -> pl.DataFrame:
    if scores.height == 0:
        return scores.select([*keys, "score"]) if all(k in scores.columns for k in keys) else scores
    carried = [c for c in ("category", "task_type", "source") if c in scores.columns and c not in keys]
    return scores.group_by(keys, maintain_order=True).agg(
        (pl.col("status") == "correct").all().cast(pl.Float64).alias("score"),
        pl.when((pl.col("status") == "correct").all())
        .then(pl.lit("correct"))
        .when(pl.col("status").is_in(["unparseable", "truncated", "error"]).any())
        .then(pl.col("status").filter(pl.col("status").is_in(["unparseable", "truncated", "error"])).first())
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
