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

    question_id = dy.String(primary_key=True, min_length=1)
    source = dy.String(nullable=False)
    split = dy.String(nullable=False)
    task_type = dy.String(nullable=False)
    sub_task_type = dy.String(nullable=False)
    skipped = dy.Bool(nullable=False)
    extracted_phrases = dy.List(dy.String(nullable=False), nullable=False)
    phrases = dy.List(dy.String(nullable=False, min_length=1), nullable=False)
    backend = dy.String(nullable=False, min_length=1)
    extractor = dy.String(nullable=False, min_length=1)

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
