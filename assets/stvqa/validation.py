"""Validation of generated STVQA items: the checks a JSON schema cannot express.

The generation schema already fixes the shape (keys, types, 2-4 options, a letter A-D, the category
and level names, a rating 1-10). :func:`validate_item` adds what it cannot: the options are distinct
(after removing ``(A)``-style labels, case and spacing), the gold letter points at one of the options,
the question is a question. It also normalises harmless variants: labels in the options, a
lower-case letter, ``"(B)"``, category spellings such as ``"instance location"`` or SpatialThinker's
``"REL_LEFT_RIGHT"``, a rating given as text.

An answer with any invalid item is asked again once with the problems listed; what is still invalid
after that is quarantined (see :mod:`assets.stvqa.generate`).

>>> item, problems = validate_item({"question": "Where is the cup?", "options": ["(A) on", "(B) under"],
...                                 "answer": "b", "category": "relation", "level": "easy", "rating": "7"})
>>> problems, item.options, item.answer
([], ('on', 'under'), 'B')
>>> validate_item({"question": "Q?", "options": ["a", "A"], "answer": "C", "category": "size",
...                "level": "easy", "rating": 5})[1]
['options are not distinct: a, A', 'gold letter C is outside the 2 options']
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from assets.stvqa.text import normalize_option, strip_option_label
from assets.stvqa.vocabulary import CATEGORIES, LEVELS

LETTERS = "ABCD"
MIN_OPTIONS, MAX_OPTIONS = 2, 4
_LETTER = re.compile(r"^\(?\s*([A-Da-d])\s*\)?[.:]?$")


@dataclass(frozen=True)
class GeneratedItem:
    """A generated multiple-choice item that passed validation.

    Attributes:
        question (`str`): the question.
        options (`tuple[str, ...]`): 2-4 distinct options, labels removed.
        answer (`str`): gold letter.
        category (`str`): one of the nine categories.
        level (`str`): ``easy``, ``medium`` or ``hard``.
        rating (`int`): 1-10.
    """

    question: str
    options: tuple[str, ...]
    answer: str
    category: str
    level: str
    rating: int

    @property
    def answer_index(self) -> int:
        """0-based index of the gold option."""
        return LETTERS.index(self.answer)

    @property
    def answer_text(self) -> str:
        """The gold option's text."""
        return self.options[self.answer_index]

    def as_dict(self) -> dict[str, Any]:
        """Plain JSON-ready values."""
        return {
            "question": self.question,
            "options": list(self.options),
            "answer": self.answer,
            "category": self.category,
            "level": self.level,
            "rating": self.rating,
        }


def normalize_category(value: Any) -> str | None:
    """A category name from the spellings generators use, or `None`.

    >>> normalize_category("Instance Location"), normalize_category("REL_ABOVE_BELOW"), normalize_category("colour")
    ('instance_location', 'relation', None)
    """
    if not isinstance(value, str):
        return None
    text = re.sub(r"[\s\-]+", "_", value.strip().lower())
    if text.startswith("rel_") or text in ("relations", "spatial_relation"):
        return "relation"
    if text in ("location", "instance_position"):
        return "instance_location"
    return text if text in CATEGORIES else None


def normalize_letter(value: Any) -> str | None:
    """The gold letter from ``"B"``, ``"b"``, ``"(B)"``, ``"B."``; `None` for anything else.

    >>> normalize_letter("(c)"), normalize_letter("B. under"), normalize_letter(1)
    ('C', None, None)
    """
    if not isinstance(value, str):
        return None
    match = _LETTER.match(value.strip())
    return match.group(1).upper() if match else None


def normalize_rating(value: Any) -> int | None:
    """An integer rating 1-10 from an int, a whole float or digits; `None` otherwise.

    >>> normalize_rating(7.0), normalize_rating("8"), normalize_rating(11), normalize_rating(True)
    (7, 8, None, None)
    """
    if isinstance(value, bool):
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value.strip())
    if isinstance(value, int) and 1 <= value <= 10:
        return value
    return None


def validate_item(raw: Any) -> tuple[GeneratedItem | None, list[str]]:
    """Check and normalise one generated item.

    Args:
        raw: the item as parsed from the model's JSON.

    Returns:
        `(item, [])` when valid, `(None, problems)` otherwise; each problem is a short sentence.
    """
    if not isinstance(raw, Mapping):
        return None, [f"item is a {type(raw).__name__}, not an object"]
    problems: list[str] = []
    question = raw.get("question")
    if not isinstance(question, str) or not question.strip():
        problems.append("question is missing or empty")
        question = ""
    options_raw = raw.get("options")
    options: list[str] = []
    if not isinstance(options_raw, list) or not all(isinstance(option, str) for option in options_raw):
        problems.append("options must be a list of strings")
    else:
        options = [
            strip_option_label(option, LETTERS[index] if index < len(LETTERS) else None)
            for index, option in enumerate(options_raw)
        ]
        if not MIN_OPTIONS <= len(options) <= MAX_OPTIONS:
            problems.append(f"{len(options)} options; 2 to 4 are required")
        if any(not option for option in options):
            problems.append("an option is empty")
        normalised = [normalize_option(option) for option in options]
        if len(set(normalised)) != len(normalised):
            problems.append("options are not distinct: " + ", ".join(options))
    answer = normalize_letter(raw.get("answer"))
    if answer is None:
        problems.append(f"answer {raw.get('answer')!r} is not a single letter A-D")
    elif options and LETTERS.index(answer) >= len(options):
        problems.append(f"gold letter {answer} is outside the {len(options)} options")
    category = normalize_category(raw.get("category"))
    if category is None:
        problems.append(f"category {raw.get('category')!r} is not one of {', '.join(CATEGORIES)}")
    level_raw = raw.get("level")
    level = level_raw.strip().lower() if isinstance(level_raw, str) else None
    if level not in LEVELS:
        problems.append(f"level {level_raw!r} is not easy, medium or hard")
    rating = normalize_rating(raw.get("rating"))
    if rating is None:
        problems.append(f"rating {raw.get('rating')!r} is not an integer 1-10")
    if problems:
        return None, problems
    # each of these, when None (or not a level), added a problem above
    assert answer is not None and category is not None and level is not None and rating is not None
    return GeneratedItem(question.strip(), tuple(options), answer, category, level, rating), []
