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

CONTRACT_VERSION = "1.1.0"  # 1.1: origin (from stvqa_candidates)
ATTEMPTS_CONTRACT_VERSION = "1.0.0"
ATTEMPT_STATUSES = ["answered", "unparseable", "abstained", "error"]


class StvqaValidated(StvqaCandidates):
    """A candidate question kept by the pass@2 filter: every candidate column and rule, plus the filter's record."""

    pass_at_2_backend = dy.String(
        nullable=False,
        min_length=1,
        description="Answering backend of the filter: 'solver' (offline scene-graph solver) or 'openai' (a "
        "strong VLM through the stvqa_judge_llm resource).",
    )
    pass_at_2_model = dy.String(
        nullable=False,
        min_length=1,
        description="The answering model: 'scene-graph-solver', or '<provider>:<model>' (e.g. 'openai:gpt-4o').",
    )
    pass_at_2_attempts = dy.Int64(
        nullable=False,
        min=1,
        description="Attempts made: the first round's tries (2 by default), plus a second round of as many only "
        "when no try of the first was right (at most 4 by default).",
    )
    pass_at_2_correct = dy.Int64(
        nullable=False,
        min=1,
        description="Attempts whose letter was the gold letter (at least 1: the row was kept).",
    )
    first_correct_attempt = dy.Int64(
        nullable=False, min=1, description="1-based number of the first attempt that gave the gold letter."
    )
    attempt_answers = dy.List(
        dy.String(nullable=False),
        nullable=False,
        min_length=1,
        description="Letter of every attempt in order (one per attempt); empty text for an attempt without a "
        "letter (unparseable, abstained or failed).",
    )

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

    question_id = dy.String(
        primary_key=True, min_length=1, description="The stvqa_candidates.question_id that was answered."
    )
    attempt = dy.Int64(
        primary_key=True,
        min=1,
        description="1-based attempt number across rounds (1-2 in round 1, 3-4 in round 2 by default).",
    )
    image_id = dy.String(nullable=False, min_length=1, description="The candidate's scene_graphs.image_id.")
    shard = dy.String(
        nullable=False, regex=r"^\d{2}$", description="The candidate's partition key '00' .. '31'."
    )
    category = dy.String(
        nullable=False, regex=one_of(CATEGORIES), description="The candidate's category (one of the nine)."
    )
    level = dy.String(
        nullable=False, regex=one_of(LEVELS), description="The candidate's level: 'easy', 'medium' or 'hard'."
    )
    round = dy.Int64(
        nullable=False,
        min=1,
        description="1-based round of the attempt; a later round is asked only when no earlier try was right.",
    )
    backend = dy.String(
        nullable=False, min_length=1, description="Answering backend: 'solver' (offline) or 'openai'."
    )
    model = dy.String(
        nullable=False,
        min_length=1,
        description="The answering model: 'scene-graph-solver', or '<provider>:<model>'.",
    )
    gold = dy.String(nullable=False, regex=r"^[A-D]$", description="The candidate's gold letter A-D.")
    answer = dy.String(
        nullable=True,
        regex=r"^[A-D]$",
        description="The letter read from the reply (only a reply that is exactly one option letter counts); "
        "null unless status is 'answered'.",
    )
    correct = dy.Bool(nullable=False, description="True exactly when answer equals gold.")
    status = dy.String(
        nullable=False,
        regex=one_of(ATTEMPT_STATUSES),
        description="'answered' (a letter), 'unparseable' (a reply that is not one option letter), 'abstained' "
        "(the solver could not settle the question), 'error' (no reply: transport failure, refusal).",
    )
    raw_text = dy.String(
        nullable=True,
        description="The reply as received (the solver's letter for the solver); null when there was none.",
    )
    error = dy.String(
        nullable=True,
        description="Why no letter came: the transport or provider error for 'error', the solver's reason for "
        "'abstained'; null otherwise.",
    )
    cached = dy.Bool(
        nullable=False,
        description="True when the reply came from the response cache (no call made); always false for the "
        "solver.",
    )
    cost_usd = dy.Float64(
        nullable=False,
        min=0.0,
        description="US dollars this build paid for the call (0 when cached or for the solver; the first "
        "purchase's price is not repeated).",
    )

    @dy.rule()
    def correct_means_gold(cls) -> pl.Expr:
        """An attempt is correct exactly when its letter is the gold letter."""
        return cls.correct.col == (cls.answer.col.is_not_null() & (cls.answer.col == cls.gold.col))

    @dy.rule()
    def answered_has_letter(cls) -> pl.Expr:
        """Only answered attempts carry a letter."""
        return (cls.status.col == "answered") == cls.answer.col.is_not_null()
