"""The one noun normaliser shared by grounding, STVQA and the rewards."""

import pytest

from assets.grounding.vocabulary import singularize as grounding_singularize
from assets.stvqa.text import lemmatize_word
from data_contracts.nouns import singularize
from training.rewards.similarity import singular


@pytest.mark.parametrize(
    "word, expected",
    [
        ("cups", "cup"),  # regular -s
        ("benches", "bench"),  # -ches
        ("cherries", "cherry"),  # -ies
        ("knives", "knife"),  # irregular table
        ("people", "person"),  # irregular, no final s
        ("glasses", "glass"),  # -sses (so "how many glasses" finds each glass)
        ("sunglasses", "sunglasses"),  # invariant
        ("bus", "bus"),  # short word
        ("cactus", "cactus"),  # invariant -us
        ("tomatoes", "tomato"),  # -oes from the table
        ("t-shirts", "t-shirt"),  # hyphenated noun
        ("Chairs", "chair"),  # lower-cased
    ],
)
def test_singularize(word, expected):
    assert singularize(word) == expected


def test_every_caller_uses_the_same_rule():
    for word in ("glasses", "shelves", "dresses", "mangoes", "series", "horses"):
        assert (
            grounding_singularize(word) == lemmatize_word(word) == singular(word.lower()) == singularize(word)
        )
