"""Precision and recall of the offline phrase extractor on labelled spatial questions.

The labelled set (``fixtures/phrase_questions.jsonl``, labelling rules in ``fixtures/README.md``) holds
questions in the wording of OmniSpatial, SpatiaLab, CV-Bench, VSI-Bench and other benchmarks. The floors
sit a little under the figures measured when they were set (rule-based chunker, object vocabulary):

| split | questions | phrase precision | phrase recall |
|---|---|---|---|
| all | 299 | 0.996 | 0.990 |
| held_out | 69 | 0.988 | 0.970 |

Without the vocabulary the same chunker measured precision 0.848 and recall 0.975 on all 299.
``benchmarks/bench_phrases.py`` prints the current figures.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from assets.grounding.object_vocabulary import default_object_vocabulary
from assets.grounding.phrase_quality import (
    evaluate_extractor,
    head_key,
    load_labelled_questions,
    phrase_key,
    score_phrases,
)
from assets.grounding.phrases import OfflinePhraseBackend, RuleBasedChunker

FIXTURE = Path(__file__).parent / "fixtures" / "phrase_questions.jsonl"
TRICKY_WORDS = (
    "bit",
    "side",
    "left",
    "distance",
    "angle",
    "view",
    "camera",
    "relative",
    "constant",
    "direction",
)


@pytest.fixture(scope="module")
def labelled():
    return load_labelled_questions(FIXTURE)


def _rules(vocabulary=True) -> OfflinePhraseBackend:
    return OfflinePhraseBackend(RuleBasedChunker(), default_object_vocabulary() if vocabulary else None)


def test_the_labelled_set_is_large_varied_and_tricky(labelled):
    assert len(labelled) >= 200
    assert len({item.id for item in labelled}) == len(labelled)
    styles = Counter(item.style for item in labelled)
    assert set(styles) == {"omnispatial", "spatialab", "cv-bench", "vsi-bench", "other"}
    assert min(styles.values()) >= 20
    assert Counter(item.split for item in labelled) == {"tuning": 230, "held_out": 69}
    text = " ".join(item.question.lower() for item in labelled)
    for word in TRICKY_WORDS:
        assert f" {word}" in text, word
    labels = {phrase_key(phrase) for item in labelled for phrase in item.objects}
    assert not labels & set(TRICKY_WORDS)


@pytest.mark.parametrize(
    ("split", "min_precision", "min_recall"),
    [("all", 0.98, 0.97), ("held_out", 0.96, 0.95)],
)
def test_offline_extractor_precision_and_recall(labelled, split, min_precision, min_recall):
    questions = [item for item in labelled if split in ("all", item.split)]
    scores = evaluate_extractor(questions, _rules().phrases)
    for match in ("phrase", "head"):
        found = scores[match]
        assert found.precision >= min_precision, (match, found.summary(), found.wrong)
        assert found.recall >= min_recall, (match, found.summary(), found.wrong)


def test_the_vocabulary_removes_non_objects_without_losing_objects(labelled):
    without = evaluate_extractor(labelled, _rules(vocabulary=False).phrases)["phrase"]
    with_vocabulary = evaluate_extractor(labelled, _rules().phrases)["phrase"]
    assert without.precision < 0.9 < with_vocabulary.precision
    assert with_vocabulary.recall >= without.recall - 0.01


def test_tricky_words_are_never_kept(labelled):
    backend = _rules()
    kept = {head_key(phrase) for item in labelled for phrase in backend.phrases(item.question, item.options)}
    assert not kept & set(TRICKY_WORDS)


def test_scoring():
    scores = score_phrases([["red cups", "bit"], []], [["red cup", "table"], ["chair"]], ids=["a", "b"])
    assert (scores.true_positives, scores.false_positives, scores.false_negatives) == (1, 1, 2)
    assert scores.wrong == {"a": (["bit"], ["table"]), "b": ([], ["chair"])}
    assert scores.precision == 0.5 and scores.recall == pytest.approx(1 / 3)
    with pytest.raises(ValueError, match="predictions"):
        score_phrases([[]], [])


def test_a_bad_line_names_the_file_and_line(tmp_path):
    path = tmp_path / "questions.jsonl"
    path.write_text('{"id": "q", "question": "?", "objects": []}\n{"id": "r"}\n')
    with pytest.raises(ValueError, match="questions.jsonl:2"):
        load_labelled_questions(path)
