"""The object vocabulary of the offline phrase extractor (assets/grounding/object_vocabulary.py)."""

from __future__ import annotations

import pytest

from assets.grounding.object_vocabulary import (
    AMBIGUOUS_NAMES,
    COCO_CATEGORIES,
    LVIS_CATEGORIES,
    VG150_CATEGORIES,
    ObjectVocabulary,
    default_object_vocabulary,
    normalise_name,
)


def test_the_public_lists_have_their_published_sizes():
    assert len(COCO_CATEGORIES) == len(set(COCO_CATEGORIES)) == 80
    assert len(LVIS_CATEGORIES) == len(set(LVIS_CATEGORIES)) == 1203
    assert len(VG150_CATEGORIES) == len(set(VG150_CATEGORIES)) == 150
    assert {"dining table", "traffic light", "hair drier"} <= set(COCO_CATEGORIES)
    assert {"trash_can", "bus_(vehicle)", "monitor_(computer_equipment)"} <= set(LVIS_CATEGORIES)


@pytest.mark.parametrize(
    ("words", "category"),
    [
        (["traffic", "lights"], "traffic light"),  # multi-word, plural
        (["wooden", "dining", "table"], "dining table"),  # modifier before a multi-word name
        (["buses"], "bus"),  # LVIS "bus_(vehicle)", irregular plural
        (["people"], "person"),  # irregular plural
        (["knives"], "knife"),
        (["trash", "cans"], "trash can"),
        (["bow", "tie"], "bow tie"),  # LVIS "bow-tie" without the hyphen
        (["man's"], "man"),  # a possessive
        (["lamp", "shade"], "lamp shade"),  # LVIS "lampshade" written as two words
        (["bit"], None),
        (["constant"], None),
        (["short"], None),  # ambiguous: VG150's "short" (shorts) is mostly an adjective
        (["red"], None),  # a colour, even where it is a category ("orange")
        (["orange"], None),
        (["cartesian", "plane"], None),  # a non-object ending in an object word
    ],
)
def test_category(words, category):
    assert default_object_vocabulary().category(words) == category


def test_ambiguous_names_still_end_longer_names():
    vocabulary = default_object_vocabulary()
    assert "stand" in AMBIGUOUS_NAMES and vocabulary.category(["tv", "stand"]) == "tv stand"
    assert vocabulary.category(["stand"]) is None


def test_object_words_cut_trailing_non_objects():
    vocabulary = default_object_vocabulary()
    assert vocabulary.object_words(["spoon", "relative"]) == ["spoon"]
    assert vocabulary.object_words(["eye", "level"]) is None  # no cut when the whole names no object


def test_a_small_vocabulary():
    vocabulary = ObjectVocabulary(["cup", "date_(fruit)", "sofa_bed"], ambiguous=["date"])
    assert len(vocabulary) == 2 and "sofa bed" in vocabulary and "date" not in vocabulary
    assert normalise_name("Sofa_Beds") == ("sofa", "bed")
