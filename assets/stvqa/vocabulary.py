"""STVQA's fixed vocabularies: categories, levels, balance targets, and the relation predicates.

The relation vocabulary is VG150's 50 predicates plus 34 spatial relations, the 84 relations the
SpatialThinker page describes ("VG150 predicates augmented with +34 spatial relations, e.g.
near/far, bigger/taller, facing away, inside/beneath"). Predicates written in scene graphs are
canonicalised (lower case, single spaces, common paraphrases mapped: ``"to the left of"`` ->
``"left of"``), and the spatial ones have inverses used to verify and contradict relations.

>>> canonical_predicate("  To The LEFT of ")
'left of'
>>> INVERSE_PREDICATES["on"], INVERSE_PREDICATES["next to"]
('under', 'next to')
>>> len(RELATION_VOCABULARY)
84
"""

from __future__ import annotations

import re

from data_contracts import stvqa_candidates

CATEGORIES = tuple(stvqa_candidates.CATEGORIES)
"""The nine STVQA task categories (the contract's list)."""

LEVELS = tuple(stvqa_candidates.LEVELS)

LEVEL_TARGETS = {"easy": 0.4, "medium": 0.4, "hard": 0.2}
"""Target share of each difficulty level."""

RELATION_SHARE = 0.5
"""Share of ``relation`` questions in the balanced data set; the other eight split the rest equally."""


def category_targets(relation_share: float = RELATION_SHARE) -> dict[str, float]:
    """Target share per category: ``relation_share`` for relation, the rest split equally.

    >>> category_targets()["relation"], category_targets()["depth"]
    (0.5, 0.0625)
    """
    others = [category for category in CATEGORIES if category != "relation"]
    share = (1.0 - relation_share) / len(others)
    return {"relation": relation_share, **dict.fromkeys(others, share)}


VG150_PREDICATES = (
    "above",
    "across",
    "against",
    "along",
    "and",
    "at",
    "attached to",
    "behind",
    "belonging to",
    "between",
    "carrying",
    "covered in",
    "covering",
    "eating",
    "flying in",
    "for",
    "from",
    "growing on",
    "hanging from",
    "has",
    "holding",
    "in",
    "in front of",
    "laying on",
    "looking at",
    "lying on",
    "made of",
    "mounted on",
    "near",
    "of",
    "on",
    "on back of",
    "over",
    "painted on",
    "parked on",
    "part of",
    "playing",
    "riding",
    "says",
    "sitting on",
    "standing on",
    "to",
    "under",
    "using",
    "walking in",
    "walking on",
    "watching",
    "wearing",
    "wears",
    "with",
)
"""The 50 predicates of the VG150 scene-graph split."""

SPATIAL_PREDICATES = (
    "left of",
    "right of",
    "next to",
    "beside",
    "below",
    "beneath",
    "on top of",
    "inside",
    "outside",
    "far from",
    "close to",
    "bigger than",
    "smaller than",
    "taller than",
    "shorter than",
    "wider than",
    "narrower than",
    "facing",
    "facing away from",
    "touching",
    "leaning against",
    "in between",
    "surrounding",
    "parallel to",
    "perpendicular to",
    "across from",
    "alongside",
    "at the back of",
    "in the middle of",
    "at the edge of",
    "higher than",
    "lower than",
    "closer to the camera than",
    "farther from the camera than",
)
"""The 34 spatial relations added to VG150's predicates."""

RELATION_VOCABULARY = VG150_PREDICATES + SPATIAL_PREDICATES

INVERSE_PREDICATES: dict[str, str] = {
    "left of": "right of",
    "right of": "left of",
    "above": "below",
    "below": "above",
    "on": "under",
    "under": "on",
    "behind": "in front of",
    "in front of": "behind",
    "bigger than": "smaller than",
    "smaller than": "bigger than",
    "taller than": "shorter than",
    "shorter than": "taller than",
    "higher than": "lower than",
    "lower than": "higher than",
    "closer to the camera than": "farther from the camera than",
    "farther from the camera than": "closer to the camera than",
    "next to": "next to",
    "near": "near",
    "far from": "far from",
}
"""For ``s p o``, the predicate that states the same fact as ``o inverse(p) s``."""

SYMMETRIC_PREDICATES = frozenset(
    predicate for predicate, inverse in INVERSE_PREDICATES.items() if predicate == inverse
)

VERIFIABLE_PREDICATES = tuple(
    predicate for predicate in INVERSE_PREDICATES if predicate not in SYMMETRIC_PREDICATES
)
"""Asymmetric predicates whose truth and falsity the templates can establish."""

CONTACT_PREDICATES = frozenset(
    {
        "on",
        "under",
        "on top of",
        "next to",
        "beside",
        "touching",
        "holding",
        "carrying",
        "leaning against",
        "against",
        "attached to",
        "sitting on",
        "standing on",
        "lying on",
        "laying on",
        "hanging from",
        "mounted on",
        "riding",
        "using",
        "eating",
        "wearing",
        "wears",
        "in",
        "inside",
        "close to",
    }
)
"""Predicates that place two objects within arm's reach of each other."""

_PARAPHRASES = {
    "to the left of": "left of",
    "on the left of": "left of",
    "left": "left of",
    "to the right of": "right of",
    "on the right of": "right of",
    "right": "right of",
    "on top of": "on top of",
    "in back of": "behind",
    "at the back of": "at the back of",
    "underneath": "under",
    "beneath": "beneath",
    "larger than": "bigger than",
    "near to": "near",
    "next": "next to",
    "by": "next to",
    "sitting in": "in",
    "inside of": "inside",
    "in front": "in front of",
    "infront of": "in front of",
}

PREDICATE_ALIASES: dict[str, str] = {
    "on top of": "on",
    "beneath": "under",
    "beside": "next to",
    "in back of": "behind",
}
"""Predicates that mean one of the verifiable predicates (used when checking relations)."""


def canonical_predicate(predicate: str) -> str:
    """Lower case, single spaces, common paraphrases replaced.

    >>> canonical_predicate("ON"), canonical_predicate("in back of")
    ('on', 'behind')
    """
    text = re.sub(r"\s+", " ", predicate.strip().lower())
    return _PARAPHRASES.get(text, text)


def fact_predicate(predicate: str) -> str:
    """The verifiable predicate a canonical predicate states (``"on top of"`` -> ``"on"``), else itself.

    >>> fact_predicate("beside"), fact_predicate("wearing")
    ('next to', 'wearing')
    """
    canonical = canonical_predicate(predicate)
    return PREDICATE_ALIASES.get(canonical, canonical)
