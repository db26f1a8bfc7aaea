"""Contract for ``object_phrases``: the physical objects and persons each question refers to.

One row per question (of the configured sources and splits). ``extracted_phrases`` is what the
backend returned (an LLM's JSON list, or spaCy noun chunks / the rule-based chunker); ``phrases`` is
what survives the one shared filter (relational, directional and non-visual terms removed, modifiers
that tell instances apart kept) and becomes the detector's text queries. ``skipped`` marks task types
where object grounding is not meaningful: they get no phrases.

>>> sorted(ObjectPhrases.primary_key())
['question_id']
"""

from __future__ import annotations

import dataframely as dy
import polars as pl

CONTRACT_VERSION = "1.0.0"


class ObjectPhrases(dy.Schema):
    """The object phrases of one question."""

    question_id = dy.String(
        primary_key=True, min_length=1, description="The question's mcq_questions.question_id."
    )
    source = dy.String(
        nullable=False,
        description="mcq_questions.source of the question (the run config's sources; default 'omnispatial').",
    )
    split = dy.String(
        nullable=False,
        description="mcq_questions.split of the question (the run config's splits; default 'train').",
    )
    task_type = dy.String(nullable=False, description="mcq_questions.task_type of the question.")
    sub_task_type = dy.String(
        nullable=False,
        description="mcq_questions.sub_task_type of the question (empty text when it has none).",
    )
    skipped = dy.Bool(
        nullable=False,
        description="True when the task type or sub-task type is in the skip list (default "
        "'Pattern_Recognition': abstract patterns, no physical objects); such rows have no phrases and nothing "
        "is extracted for them.",
    )
    extracted_phrases = dy.List(
        dy.String(nullable=False),
        nullable=False,
        description="Candidate phrases exactly as the backend returned them, before the shared filter: the LLM's "
        "JSON list, or the noun chunks of the question and then of each option (spaCy or the rule-based "
        "chunker). Empty for skipped rows.",
    )
    phrases = dy.List(
        dy.String(nullable=False, min_length=1),
        nullable=False,
        description="The detector's text queries: extracted_phrases after the shared filter (lower case, "
        "determiners and directional or relational words removed, appearance modifiers kept, duplicates "
        "dropped, first-mention order). Empty when nothing boxable was named or the row is skipped.",
    )
    backend = dy.String(
        nullable=False,
        min_length=1,
        description="Phrase backend of the run: 'spacy' (offline) or 'openai' (an LLM through the phrase_llm "
        "resource).",
    )
    extractor = dy.String(
        nullable=False,
        min_length=1,
        description="Exact extractor and version: 'rules@<rules version>', 'spacy/<pipeline>@<version>', or "
        "'<provider>/<model>/object_phrases@<prompt version>' for the LLM backend.",
    )

    @dy.rule()
    def skipped_rows_have_no_phrases(cls) -> pl.Expr:
        """A skipped task type yields no queries."""
        return ~cls.skipped.col | (cls.phrases.col.list.len() == 0)

    @dy.rule()
    def phrases_are_unique(cls) -> pl.Expr:
        """No phrase is queried twice for one question."""
        return cls.phrases.col.list.n_unique() == cls.phrases.col.list.len()

    @dy.rule()
    def phrases_have_no_separator(cls) -> pl.Expr:
        """Phrases never contain '.', the separator of the detector's text prompt."""
        return ~cls.phrases.col.list.eval(pl.element().str.contains(".", literal=True)).list.any()
