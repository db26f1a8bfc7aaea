"""Contracts for the pass@2 stage: ``stvqa_validated`` and its audit table ``stvqa_pass_at_2_attempts``.

``stvqa_validated``: one row per candidate question that a strong model (or the offline scene-graph
solver) answered right at least once in its pass@2 attempts; the candidate's columns plus how many
attempts were made, how many were right, the first right one, and every attempt's letter (empty
text for no letter).

``stvqa_pass_at_2_attempts``: one row per attempt for every candidate that was answered, kept or not,
so the filter can be audited and re-thresholded without calling the model again.
"""

from __future__ import annotations

import dataframely as dy
import polars as pl

from data_contracts.stvqa_candidates import (
    CATEGORIES,
    LEVELS,
    StvqaCandidates,
    one_of,
)

CONTRACT_VERSION = "1.0.0"
ATTEMPTS_CONTRACT_VERSION = "1.0.0"
ATTEMPT_STATUSES = ["answered", "unparseable", "abstained", "error"]


class StvqaValidated(StvqaCandidates):
    """A candidate question kept by the pass@2 filter: every candidate column and rule, plus the filter's record."""

    pass_at_2_backend = dy.String(nullable=False, min_length=1)
    pass_at_2_model = dy.String(nullable=False, min_length=1)
    pass_at_2_attempts = dy.Int64(nullable=False, min=1)
    pass_at_2_correct = dy.Int64(nullable=False, min=1)
    first_correct_attempt = dy.Int64(nullable=False, min=1)
    attempt_answers = dy.List(dy.String(nullable=False), nullable=False, min_length=1)

    @dy.rule()
    def attempts_consistent(cls) -> pl.Expr:
        """Right answers never exceed attempts; one stored letter per attempt; the first right one exists."""
        return (
            (cls.pass_at_2_correct.col <= cls.pass_at_2_attempts.col)
            & (cls.attempt_answers.col.list.len() == cls.pass_at_2_attempts.col)
            & (cls.first_correct_attempt.col <= cls.pass_at_2_attempts.col)
        )


class StvqaPassAtTwoAttempts(dy.Schema):
    """One answer attempt of the pass@2 filter."""

    question_id = dy.String(primary_key=True, min_length=1)
    attempt = dy.Int64(primary_key=True, min=1)
    image_id = dy.String(nullable=False, min_length=1)
    shard = dy.String(nullable=False, regex=r"^\d{2}$")
    category = dy.String(nullable=False, regex=one_of(CATEGORIES))
    level = dy.String(nullable=False, regex=one_of(LEVELS))
    round = dy.Int64(nullable=False, min=1)
    backend = dy.String(nullable=False, min_length=1)
    model = dy.String(nullable=False, min_length=1)
    gold = dy.String(nullable=False, regex=r"^[A-D]$")
    answer = dy.String(nullable=True, regex=r"^[A-D]$")
    correct = dy.Bool(nullable=False)
    status = dy.String(nullable=False, regex=one_of(ATTEMPT_STATUSES))
    raw_text = dy.String(nullable=True)
    error = dy.String(nullable=True)
    cached = dy.Bool(nullable=False)
    cost_usd = dy.Float64(nullable=False, min=0.0)

    @dy.rule()
    def correct_means_gold(cls) -> pl.Expr:
        """An attempt is correct exactly when its letter is the gold letter."""
        return cls.correct.col == (cls.answer.col.is_not_null() & (cls.answer.col == cls.gold.col))

    @dy.rule()
    def answered_has_letter(cls) -> pl.Expr:
        """Only answered attempts carry a letter."""
        return (cls.status.col == "answered") == cls.answer.col.is_not_null()
