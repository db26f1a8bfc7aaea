"""The one English noun normaliser used to match object names across the project.

Phrase-to-category matching (grounding), question-to-scene matching (STVQA) and label similarity
(rewards) all compare object names by their singular forms; they share this table and these rules
so that a name matches the same way everywhere.

>>> [singularize(w) for w in ["cups", "benches", "cherries", "knives", "glasses", "buses", "T-shirts"]]
['cup', 'bench', 'cherry', 'knife', 'glass', 'bus', 't-shirt']
"""

from __future__ import annotations

import re
from functools import lru_cache

IRREGULAR_PLURALS: dict[str, str] = {
    "aircraft": "aircraft",
    "buses": "bus",
    "cacti": "cactus",
    "calves": "calf",
    "children": "child",
    "cookies": "cookie",
    "deer": "deer",
    "dice": "die",
    "dominoes": "domino",
    "feet": "foot",
    "fish": "fish",
    "fungi": "fungus",
    "gases": "gas",
    "geese": "goose",
    "halves": "half",
    "heroes": "hero",
    "knives": "knife",
    "leaves": "leaf",
    "lenses": "lens",
    "lives": "life",
    "loaves": "loaf",
    "mangoes": "mango",
    "men": "man",
    "mice": "mouse",
    "movies": "movie",
    "oxen": "ox",
    "people": "person",
    "persons": "person",
    "pies": "pie",
    "potatoes": "potato",
    "scarves": "scarf",
    "series": "series",
    "sheep": "sheep",
    "shelves": "shelf",
    "skis": "ski",
    "species": "species",
    "taxis": "taxi",
    "teeth": "tooth",
    "thieves": "thief",
    "ties": "tie",
    "tomatoes": "tomato",
    "tvs": "tv",
    "volcanoes": "volcano",
    "wives": "wife",
    "wolves": "wolf",
    "women": "woman",
}
"""Plural (or invariant) forms that the suffix rules would get wrong, with their singulars."""

INVARIANT_NOUNS = frozenset(
    [
        "across",
        "as",
        "atlas",
        "bass",
        "bias",
        "boss",
        "bus",
        "cactus",
        "canvas",
        "chess",
        "class",
        "clothes",
        "cross",
        "deer",
        "does",
        "dress",
        "fish",
        "gas",
        "glass",
        "goggles",
        "grass",
        "has",
        "his",
        "is",
        "its",
        "jeans",
        "lens",
        "less",
        "mass",
        "mathematics",
        "moss",
        "news",
        "octopus",
        "pants",
        "physics",
        "press",
        "scissors",
        "series",
        "sheep",
        "shorts",
        "species",
        "sunglasses",
        "tennis",
        "this",
        "towards",
        "trousers",
        "us",
        "was",
        "yes",
    ]
)
"""Words ending in "s" that are not regular plurals (or whose singular is not worth using)."""

_NOUN = re.compile(r"[a-z][a-z'-]*")


@lru_cache(maxsize=65536)
def singularize(word: str) -> str:
    """The singular of an English noun (lower-cased): irregular table, then suffix rules.

    >>> [singularize(w) for w in ["chairs", "boxes", "berries", "glass", "bus", "gloves", "Tomatoes"]]
    ['chair', 'box', 'berry', 'glass', 'bus', 'glove', 'tomato']
    """
    lower = word.lower()
    if lower in IRREGULAR_PLURALS:
        return IRREGULAR_PLURALS[lower]
    if lower in INVARIANT_NOUNS or len(lower) <= 3 or not lower.endswith("s") or not _NOUN.fullmatch(lower):
        return lower
    if lower.endswith(("ss", "us", "is", "ous")):
        return lower
    if lower.endswith("ies") and len(lower) > 4:
        return lower[:-3] + "y"
    if lower.endswith(("ches", "shes", "xes", "sses", "zzes")):
        return lower[:-2]
    if lower.endswith("ses") and lower[:-2].endswith(("ss", "us")):
        return lower[:-2]
    return lower[:-1]


SINGULAR_TO_PLURAL: dict[str, str] = {singular: plural for plural, singular in IRREGULAR_PLURALS.items()}
SINGULAR_TO_PLURAL.update(
    {
        "person": "people",
        "bus": "buses",
        "glass": "glasses",
        "dress": "dresses",
        "lens": "lenses",
        "tv": "tvs",
    }
)
for _invariant in ("sheep", "fish", "deer", "series", "species"):
    SINGULAR_TO_PLURAL[_invariant] = _invariant
"""Singular nouns whose plural the suffix rules would get wrong (the inverse of the irregular table)."""


def pluralize_word(word: str) -> str:
    """The plural of a singular noun.

    >>> [pluralize_word(w) for w in ["cup", "bench", "cherry", "toy", "knife", "bus"]]
    ['cups', 'benches', 'cherries', 'toys', 'knives', 'buses']
    """
    if word in SINGULAR_TO_PLURAL:
        return SINGULAR_TO_PLURAL[word]
    if word in INVARIANT_NOUNS:
        return word
    if word.endswith("y") and len(word) > 1 and word[-2] not in "aeiou":
        return word[:-1] + "ies"
    if word.endswith(("s", "x", "z", "ch", "sh")):
        return word + "es"
    return word + "s"


def pluralize(name: str) -> str:
    """The plural of a (possibly multi-word) name: the last word is pluralised.

    >>> pluralize("traffic light"), pluralize("potted plant")
    ('traffic lights', 'potted plants')
    """
    words = name.split()
    if not words:
        return name
    return " ".join([*words[:-1], pluralize_word(words[-1])])
