"""Precision and recall of phrase extraction against questions labelled with the objects they mention.

A labelled question is one JSON object per line: ``id``, ``split`` (optional: ``tuning`` or
``held_out``), ``style`` (the benchmark whose wording it follows), ``question``, ``options`` and
``objects`` (the object phrases a detector should be asked for).
The labelled set of the tests is ``tests/grounding/fixtures/phrase_questions.jsonl`` (its README says how
it is labelled); ``benchmarks/bench_phrases.py`` prints the figures.

Two matches are counted, per question over sets of phrases:

- ``phrase``: the whole phrase, compared without articles and with its last word singular ("the red
  cups" = "red cup"), so a missing or extra modifier counts as a miss and a false positive;
- ``head``: only the head noun, the last word before any preposition, singular ("man in the blue shirt"
  = "man"), which is what decides whether the detector looks for the right kind of object.

>>> scores = score_phrases([["red cup", "bit"]], [["red cups", "table"]])
>>> scores.true_positives, scores.false_positives, scores.false_negatives, scores.precision
(1, 1, 1, 0.5)
>>> score_phrases([["man in a blue shirt"]], [["man"]], key=head_key).recall
1.0
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from assets.grounding.vocabulary import PREPOSITIONS, singularize, words

ARTICLES = frozenset({"a", "an", "the"})


@dataclass(frozen=True)
class LabelledQuestion:
    """One question with the object phrases it mentions."""

    id: str
    style: str
    question: str
    options: tuple[str, ...]
    objects: tuple[str, ...]
    split: str = ""


def load_labelled_questions(path: str | Path) -> list[LabelledQuestion]:
    """Read a JSON-lines file of labelled questions.

    Raises:
        `ValueError`: naming the file and line of a row that is not a labelled question.
    """
    questions = []
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                questions.append(
                    LabelledQuestion(
                        str(row["id"]),
                        str(row.get("style", "")),
                        str(row["question"]),
                        tuple(row.get("options") or ()),
                        tuple(row["objects"]),
                        str(row.get("split", "")),
                    )
                )
            except (json.JSONDecodeError, KeyError, TypeError) as error:
                raise ValueError(f"{path}:{number}: not a labelled question ({error})") from error
    return questions


def phrase_key(phrase: str) -> str:
    """The phrase as compared: lower-case words without articles, the last one singular.

    >>> phrase_key("The Red Cups"), phrase_key("man in a blue shirt")
    ('red cup', 'man in blue shirt')
    """
    parts = [word for word in words(phrase) if word not in ARTICLES]
    return " ".join([*parts[:-1], singularize(parts[-1])]) if parts else ""


def head_key(phrase: str) -> str:
    """The head noun: the last word before the first preposition, singular.

    >>> head_key("boys in orange clothes"), head_key("glass of water"), head_key("traffic lights")
    ('boy', 'glass', 'light')
    """
    parts = [word for word in words(phrase) if word not in ARTICLES]
    end = next((index for index, word in enumerate(parts) if index and word in PREPOSITIONS), len(parts))
    return singularize(parts[end - 1]) if end else ""


@dataclass
class PhraseScores:
    """Counts over a labelled set, with the phrases that were wrong per question id."""

    true_positives: int = 0
    false_positives: int = 0
    false_negatives: int = 0
    questions: int = 0
    wrong: dict[str, tuple[list[str], list[str]]] = field(default_factory=dict)
    """Question id -> (false positives, false negatives), as keys."""

    @property
    def precision(self) -> float:
        predicted = self.true_positives + self.false_positives
        return self.true_positives / predicted if predicted else 1.0

    @property
    def recall(self) -> float:
        expected = self.true_positives + self.false_negatives
        return self.true_positives / expected if expected else 1.0

    @property
    def f1(self) -> float:
        total = self.precision + self.recall
        return 2 * self.precision * self.recall / total if total else 0.0

    def summary(self) -> dict[str, float | int]:
        """The figures as a flat dict (rounded to 4 places)."""
        return {
            "questions": self.questions,
            "precision": round(self.precision, 4),
            "recall": round(self.recall, 4),
            "f1": round(self.f1, 4),
            "true_positives": self.true_positives,
            "false_positives": self.false_positives,
            "false_negatives": self.false_negatives,
        }


def score_phrases(
    predicted: Sequence[Sequence[str]],
    expected: Sequence[Sequence[str]],
    ids: Sequence[str] | None = None,
    key: Callable[[str], str] = phrase_key,
) -> PhraseScores:
    """Count true and false positives and false negatives, per question over sets of ``key``s.

    Args:
        predicted (`Sequence[Sequence[str]]`): the extracted phrases of each question.
        expected (`Sequence[Sequence[str]]`): the labelled phrases of each question.
        ids (`Sequence[str]`, *optional*): question ids, for the `wrong` map (positions by default).
        key (`Callable[[str], str]`, *optional*): :func:`phrase_key` (default) or :func:`head_key`.
    """
    if len(predicted) != len(expected):
        raise ValueError(f"{len(predicted)} predictions for {len(expected)} labelled questions")
    scores = PhraseScores(questions=len(expected))
    for position, (found, wanted) in enumerate(zip(predicted, expected, strict=True)):
        found_keys = {key(phrase) for phrase in found} - {""}
        wanted_keys = {key(phrase) for phrase in wanted} - {""}
        scores.true_positives += len(found_keys & wanted_keys)
        extra, missed = sorted(found_keys - wanted_keys), sorted(wanted_keys - found_keys)
        scores.false_positives += len(extra)
        scores.false_negatives += len(missed)
        if extra or missed:
            scores.wrong[ids[position] if ids else str(position)] = (extra, missed)
    return scores


def evaluate_extractor(
    questions: Sequence[LabelledQuestion], extract: Callable[[str, Sequence[str]], list[str]]
) -> dict[str, PhraseScores]:
    """Scores of ``extract(question, options) -> phrases`` on labelled questions, by match (``phrase``, ``head``).

    Example:
        >>> from assets.grounding.object_vocabulary import default_object_vocabulary
        >>> from assets.grounding.phrases import OfflinePhraseBackend, RuleBasedChunker
        >>> labelled = [LabelledQuestion("q1", "x", "Is the mug a bit left of the laptop?", (), ("mug", "laptop"))]
        >>> backend = OfflinePhraseBackend(RuleBasedChunker(), default_object_vocabulary())
        >>> evaluate_extractor(labelled, backend.phrases)["phrase"].summary()["precision"]
        1.0
    """
    predicted = [extract(item.question, item.options) for item in questions]
    expected = [item.objects for item in questions]
    ids = [item.id for item in questions]
    return {
        "phrase": score_phrases(predicted, expected, ids, phrase_key),
        "head": score_phrases(predicted, expected, ids, head_key),
    }
