"""Small English text helpers for STVQA: tokens, noun lemmas, numbers, option labels.

Object names from scene graphs are matched against question text by their lemmas, so "chairs",
"Chair" and "chair" meet, and so do multi-word names ("traffic lights" / "traffic light"). The
lemmatiser is rule-based (no model download): a table of irregular plurals, invariant nouns, and
suffix rules. Both sides of every match go through the same function, so a rule that is not
linguistically perfect (``"pants" -> "pant"``) still matches consistently.

>>> lemmatize_phrase("Traffic Lights")
'traffic light'
>>> parse_count("three"), parse_count("(B) 4")
(3, 4)
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from data_contracts.nouns import singularize

_TOKEN = re.compile(r"[a-z0-9]+(?:[-'][a-z0-9]+)*")


NUMBER_WORDS = {
    "zero": 0,
    "none": 0,
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "eleven": 11,
    "twelve": 12,
}

_OPTION_LABEL = re.compile(r"^\s*\(?([A-Da-d])\)?\s*[).:\-]?\s+(?=\S)")


def tokenize(text: str) -> list[str]:
    """Lower-case word tokens (letters, digits, inner hyphens and apostrophes); possessive ``'s`` dropped.

    >>> tokenize("The man's red cup, left-of the TV?")
    ['the', 'man', 'red', 'cup', 'left-of', 'the', 'tv']
    """
    tokens = []
    for token in _TOKEN.findall(text.lower().replace("\u2019", "'")):
        token = token.removesuffix("'s")
        tokens.append(token.strip("'"))
    return [token for token in tokens if token]


def lemmatize_word(word: str) -> str:
    """The singular form of a noun (the project's one rule: :func:`data_contracts.nouns.singularize`).

    >>> [lemmatize_word(w) for w in ["cups", "benches", "cherries", "horses", "buses", "shoes"]]
    ['cup', 'bench', 'cherry', 'horse', 'bus', 'shoe']
    """
    return singularize(word)


def lemmatize_tokens(tokens: Sequence[str]) -> tuple[str, ...]:
    """Every token lemmatised.

    >>> lemmatize_tokens(["tennis", "rackets"])
    ('tennis', 'racket')
    """
    return tuple(lemmatize_word(token) for token in tokens)


def lemmatize_phrase(text: str) -> str:
    """A phrase's tokens lemmatised and joined by single spaces.

    >>> lemmatize_phrase("  Fire  Hydrants ")
    'fire hydrant'
    """
    return " ".join(lemmatize_tokens(tokenize(text)))


def article(name: str) -> str:
    """``"a"`` or ``"an"`` for a name.

    >>> article("apple"), article("mug")
    ('an', 'a')
    """
    return "an" if name[:1].lower() in "aeiou" else "a"


def strip_option_label(option: str, letter: str | None = None) -> str:
    """Remove a leading ``(A)``/``A.``/``A)`` label from an option (only ``letter``'s, when given).

    >>> strip_option_label("(B) behind", "B"), strip_option_label("A. left"), strip_option_label("a bit")
    ('behind', 'left', 'a bit')
    """
    match = _OPTION_LABEL.match(option)
    if match is None:
        return option.strip()
    if letter is not None and match.group(1).upper() != letter.upper():
        return option.strip()
    raw = option.lstrip()
    # "a bit" must not lose its article: a label needs brackets or a following punctuation mark.
    if not (raw.startswith("(") or re.match(r"^[A-Da-d]\s*[).:\-]", raw)):
        return option.strip()
    return option[match.end() :].strip()


def normalize_option(option: str) -> str:
    """Option text for duplicate detection: label removed, case folded, spaces and end punctuation tidied.

    >>> normalize_option("(A)  Left of "), normalize_option("left of.")
    ('left of', 'left of')
    """
    text = strip_option_label(option)
    return re.sub(r"\s+", " ", text.casefold()).strip().rstrip(".").strip()


def parse_count(text: str) -> int | None:
    """The integer an option states (digits or a number word), or ``None``.

    >>> parse_count("(C) 12"), parse_count("two"), parse_count("many")
    (12, 2, None)
    """
    cleaned = strip_option_label(text).strip().lower().rstrip(".")
    if re.fullmatch(r"\d+", cleaned):
        return int(cleaned)
    return NUMBER_WORDS.get(cleaned)
