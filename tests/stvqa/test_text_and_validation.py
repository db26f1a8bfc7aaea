"""Lemmas, plurals and option labels; the validation of generated items."""

import pytest

from assets.stvqa.text import lemmatize_phrase, lemmatize_word, parse_count, strip_option_label
from assets.stvqa.validation import normalize_category, validate_item
from assets.stvqa.vocabulary import RELATION_VOCABULARY, canonical_predicate, category_targets
from data_contracts.nouns import pluralize

NAMES = [
    "chair",
    "box",
    "glass",
    "bus",
    "person",
    "shelf",
    "knife",
    "ski",
    "lens",
    "cherry",
    "toy",
    "mouse",
    "traffic light",
    "potted plant",
    "sheep",
    "pants",
    "tv",
    "bench",
    "dish",
    "vase",
    "horse",
    "shoe",
    "tomato",
    "cactus",
    "leaf",
    "couch",
    "man",
    "woman",
    "child",
    "teddy bear",
    "fire hydrant",
    "dress",
    "watch",
]


class TestLemmas:
    @pytest.mark.parametrize(
        ("word", "lemma"),
        [
            ("cups", "cup"),  # plain -s
            ("benches", "bench"),  # -ches
            ("boxes", "box"),  # -xes
            ("cherries", "cherry"),  # -ies
            ("dresses", "dress"),  # -sses
            ("buses", "bus"),  # -uses
            ("horses", "horse"),  # -ses that keeps its e
            ("shoes", "shoe"),  # -oes that keeps its e
            ("tomatoes", "tomato"),  # irregular -oes
            ("people", "person"),  # irregular
            ("shelves", "shelf"),  # irregular -ves
            ("glass", "glass"),  # singular ending in s
            ("tennis", "tennis"),  # singular ending in is
            ("bus", "bus"),  # short word
        ],
    )
    def test_lemmatize_word(self, word, lemma):
        assert lemmatize_word(word) == lemma

    @pytest.mark.parametrize("name", NAMES)
    def test_plural_round_trip(self, name):
        assert lemmatize_phrase(pluralize(name)) == lemmatize_phrase(name)

    def test_multi_word_names_lemmatise_every_word(self):
        assert lemmatize_phrase("Traffic  Lights") == "traffic light"
        assert lemmatize_phrase("the man's cups") == "the man cup"


class TestOptionsAndNumbers:
    @pytest.mark.parametrize(
        ("option", "letter", "expected"),
        [
            ("(A) on", "A", "on"),  # bracketed label
            ("B. under", "B", "under"),  # dotted label
            ("a bit left", "A", "a bit left"),  # an article is not a label
            ("(B) on", "A", "(B) on"),  # another option's label is kept
            ("left of", None, "left of"),  # no label
        ],
    )
    def test_strip_option_label(self, option, letter, expected):
        assert strip_option_label(option, letter) == expected

    @pytest.mark.parametrize(("text", "value"), [("3", 3), ("(C) 12", 12), ("two", 2), ("several", None)])
    def test_parse_count(self, text, value):
        assert parse_count(text) == value


def test_relation_vocabulary_and_targets():
    assert len(RELATION_VOCABULARY) == len(set(RELATION_VOCABULARY)) == 84
    assert canonical_predicate("To The Left Of") == "left of"
    targets = category_targets()
    assert targets["relation"] == 0.5 and sum(targets.values()) == pytest.approx(1.0)


VALID = {
    "question": "Where is the cup?",
    "options": ["on", "under"],
    "answer": "A",
    "category": "relation",
    "level": "easy",
    "rating": 7,
}


class TestValidateItem:
    @pytest.mark.parametrize(
        ("changes", "problem"),
        [
            ({"options": ["on", "On "]}, "options are not distinct"),  # duplicate after normalising
            ({"answer": "C"}, "gold letter C is outside the 2 options"),  # gold outside the options
            ({"answer": "AB"}, "is not a single letter"),  # not a letter
            ({"options": ["on"]}, "1 options; 2 to 4 are required"),  # too few options
            ({"options": ["a", "b", "c", "d", "e"]}, "5 options"),  # too many options
            ({"category": "colour"}, "category 'colour' is not one of"),  # unknown category
            ({"level": "trivial"}, "level 'trivial'"),  # unknown level
            ({"rating": 0}, "rating 0 is not an integer 1-10"),  # rating out of range
            ({"question": "  "}, "question is missing or empty"),  # empty question
        ],
    )
    def test_invalid_items(self, changes, problem):
        item, problems = validate_item({**VALID, **changes})
        assert item is None
        assert any(problem in text for text in problems), problems

    def test_normalises_harmless_variants(self):
        item, problems = validate_item(
            {
                **VALID,
                "options": ["(A) on", "(B) under", "(C) behind"],
                "answer": "(c)",
                "category": "REL_FRONT_BEHIND",
                "level": " Hard ",
                "rating": "9",
            }
        )
        assert problems == []
        assert item.options == ("on", "under", "behind")
        assert (item.answer, item.answer_text, item.category, item.level, item.rating) == (
            "C",
            "behind",
            "relation",
            "hard",
            9,
        )

    def test_not_an_object(self):
        assert validate_item(["question"])[1] == ["item is a list, not an object"]

    def test_category_spellings(self):
        assert normalize_category("instance-location") == "instance_location"
