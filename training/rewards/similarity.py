"""Label similarity: bag-of-words cosine (SpatialCORE Eq. 13), optionally over spaCy lemmas.

Each label is tokenised into lower-case alphanumeric words and represented by a binary
word-presence vector ``phi``; the similarity is the cosine of two such vectors (paper Eq. 13)::

    Sim(l_j, l_k) = phi(l_j) . phi(l_k) / (||phi(l_j)|| ||phi(l_k)||) = |W_j & W_k| / sqrt(|W_j| |W_k|)

"black sedan ahead" vs "black sedan" -> 2 / sqrt(6) = 0.816; "traffic sign" vs "traffic light" -> 0.5.
An empty label has similarity 0 with everything.

Word normalisation is configurable and needs no downloaded model:

* ``"exact"``: words as written (the paper's and the SpatialCORE reference's choice).
* ``"singular"``: a small rule-based plural stripper (``chairs`` -> ``chair``, ``boxes`` -> ``box``).
* ``spacy_pipeline="<name or path>"``: words are the lemmas of an installed spaCy pipeline (the
  public SpatialThinker code compares labels with spaCy; this keeps the comparison lexical).

>>> similarity = LabelSimilarity()
>>> round(similarity("black sedan ahead", "black sedan"), 4), similarity("traffic sign", "traffic light")
(0.8165, 0.5)
"""

from __future__ import annotations

import logging
import math
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np

from data_contracts.nouns import singularize

logger = logging.getLogger(__name__)

WORD_NORMALIZERS = ("exact", "singular")
_WORD = re.compile(r"[a-z0-9]+")
_INSTANCE_SUFFIX = re.compile(r"\.\d+$")
_SEPARATORS = re.compile(r"[_\-]")


def singular(word: str) -> str:
    """The singular of a label word (the project's one rule: :func:`data_contracts.nouns.singularize`).

    >>> [singular(w) for w in ["chairs", "boxes", "berries", "bus", "gloves"]]
    ['chair', 'box', 'berry', 'bus', 'glove']
    """
    return singularize(word)


@lru_cache(maxsize=8)
def _load_spacy(name: str):
    import spacy

    return spacy.load(name)


@lru_cache(maxsize=65536)
def _label_words(
    label: str, normalizer: str, spacy_pipeline: str | None, strip_suffix: bool
) -> frozenset[str]:
    text = label
    if strip_suffix:
        text = _INSTANCE_SUFFIX.sub("", text)
    text = _SEPARATORS.sub(" ", text)
    if spacy_pipeline is not None:
        document = _load_spacy(spacy_pipeline)(text)
        text = " ".join(token.lemma_ or token.text for token in document)
    words = _WORD.findall(text.lower())
    if normalizer == "singular":
        words = [singular(word) for word in words]
    return frozenset(words)


def bag_of_words_cosine(words_a: frozenset[str], words_b: frozenset[str]) -> float:
    """Cosine of two binary word-presence vectors given as word sets (Eq. 13).

    >>> bag_of_words_cosine(frozenset({"red", "car"}), frozenset({"car"}))
    0.7071067811865475
    """
    if not words_a or not words_b:
        return 0.0
    shared = len(words_a & words_b)
    if shared == 0:
        return 0.0
    return shared / math.sqrt(len(words_a) * len(words_b))


@dataclass(frozen=True)
class LabelSimilarity:
    """Configured bag-of-words cosine between labels; picklable, cached per process.

    Args:
        word_normalizer (`str`, *optional*, defaults to `"exact"`):
            ``"exact"`` or ``"singular"`` (see the module docstring).
        spacy_pipeline (`str`, *optional*):
            Name or path of an installed spaCy pipeline whose lemmas replace the words. Loaded when
            the object is built, so a missing pipeline fails at configuration time.
        strip_instance_suffix (`bool`, *optional*, defaults to `False`):
            Drop a trailing ``.N`` instance number first (SpatialThinker ids ``"chair.2"``).

    >>> LabelSimilarity(strip_instance_suffix=True)("traffic_light.1", "traffic light.3")
    1.0
    """

    word_normalizer: str = "exact"
    spacy_pipeline: str | None = None
    strip_instance_suffix: bool = False

    def __post_init__(self) -> None:
        if self.word_normalizer not in WORD_NORMALIZERS:
            raise ValueError(
                f"word_normalizer must be one of {WORD_NORMALIZERS}, got {self.word_normalizer!r}"
            )
        if self.spacy_pipeline is not None:
            try:
                _load_spacy(self.spacy_pipeline)
            except (OSError, ImportError) as error:
                raise ValueError(
                    f"spaCy pipeline {self.spacy_pipeline!r} cannot be loaded: {error}"
                ) from error

    def words(self, label: Any) -> frozenset[str]:
        """The normalised word set of ``label`` (empty for non-strings).

        >>> sorted(LabelSimilarity(word_normalizer="singular").words("Two red chairs"))
        ['chair', 'red', 'two']
        """
        if not isinstance(label, str):
            return frozenset()
        return _label_words(label, self.word_normalizer, self.spacy_pipeline, self.strip_instance_suffix)

    def __call__(self, label_a: Any, label_b: Any) -> float:
        """Similarity of two labels in ``[0, 1]``."""
        return bag_of_words_cosine(self.words(label_a), self.words(label_b))

    def matrix(self, labels_a, labels_b) -> np.ndarray:
        """Similarity of every label in ``labels_a`` with every label in ``labels_b``; ``(N, M)``.

        >>> LabelSimilarity().matrix(["cup", "red cup"], ["cup"]).round(3).tolist()
        [[1.0], [0.707]]
        """
        words_a = [self.words(label) for label in labels_a]
        words_b = [self.words(label) for label in labels_b]
        result = np.zeros((len(words_a), len(words_b)), dtype=np.float64)
        for row, set_a in enumerate(words_a):
            for col, set_b in enumerate(words_b):
                result[row, col] = bag_of_words_cosine(set_a, set_b)
        return result
