"""Object phrases: the shared filter, the offline extractors, the skip list and the table (phrases.py)."""

from __future__ import annotations

import polars as pl
import pytest
import spacy
from spacy.tokens import Doc

from assets.grounding.object_vocabulary import default_object_vocabulary
from assets.grounding.phrases import (
    DropReason,
    OfflinePhraseBackend,
    PhraseSettings,
    RuleBasedChunker,
    SpacyNounChunker,
    chunks_from_doc,
    clean_phrase,
    extract_object_phrases,
    filter_phrases,
    is_skipped_task,
    load_offline_extractor,
    object_phrase,
    remove_non_object_text,
    render_phrase_prompt,
)
from data_contracts.object_phrases import ObjectPhrases
from data_contracts.validation import check_frame


class TestCleanPhrase:
    @pytest.mark.parametrize(
        ("phrase", "expected"),
        [
            ("the red car", "red car"),  # determiner removed
            (
                "Boy in orange clothes",
                "boy in orange clothes",
            ),  # appearance phrase kept (the paper's example)
            ("gray vehicle", "gray vehicle"),  # distinguishing modifier kept
            ("the car on the left", "car"),  # relational tail cut
            ("the cup next to the laptop", "cup"),  # relation to another object cut
            ("left chair", "chair"),  # leading directional modifier dropped
            ("the back of the red sofa", "red sofa"),  # part-of phrase resolves to the object
            ("cup of coffee", "cup of coffee"),  # an ordinary "of" phrase stays
            ("man with a red hat", "man with a red hat"),  # appearance with "with" kept
            ("man with an umbrella", "man"),  # "with" + a non-appearance object is a relation
            (
                "boy in orange clothes left of the car",
                "boy in orange clothes",
            ),  # relation after appearance cut
            ("two chairs", "chairs"),  # leading number dropped
            ("the white cabinet facing", "white cabinet"),  # trailing verb form trimmed
            ("the white trash can", "white trash can"),  # phrase-final "can" is a noun
            ("front door", "front door"),  # compound object name kept
            ("orange objects", "orange objects"),  # generic head with a modifier kept
            ("Mr. Smith's car", "mr smith's car"),  # separators removed, possessive kept
        ],
    )
    def test_kept(self, phrase, expected):
        assert clean_phrase(phrase) == (expected, None)

    @pytest.mark.parametrize(
        ("phrase", "reason"),
        [
            ("left", DropReason.DIRECTIONAL),  # direction
            ("the front", DropReason.DIRECTIONAL),  # relative position
            ("closer", DropReason.DIRECTIONAL),  # comparative answer word
            ("distance", DropReason.NON_VISUAL),  # the paper's example
            ("direction", DropReason.NON_VISUAL),  # the paper's example
            ("the camera", DropReason.PRONOUN),  # the viewer
            ("the image", DropReason.NON_VISUAL),  # the picture itself
            ("the floor", DropReason.NON_VISUAL),  # scene-level surface: its box is the whole image
            ("a straight line", DropReason.NON_VISUAL),  # path word
            ("1.5 m", DropReason.NUMBER),  # measure
            ("3", DropReason.NUMBER),  # count answer
            ("you", DropReason.PRONOUN),  # the observer
            ("these objects", DropReason.GENERIC),  # bare generic noun
            ("", DropReason.EMPTY),  # nothing left
            ("the big red wooden box with a small blue lid on it", DropReason.TOO_LONG),  # not a query
        ],
    )
    def test_dropped(self, phrase, reason):
        assert clean_phrase(phrase) == (None, reason)


def test_filter_keeps_order_and_drops_duplicates():
    result = filter_phrases(["the gray vehicle", "a dog", "Gray vehicle", "left", 7])
    assert result.kept == ["gray vehicle", "dog"]
    assert [reason for _, reason in result.dropped] == [
        DropReason.DUPLICATE,
        DropReason.DIRECTIONAL,
        DropReason.EMPTY,
    ]


def test_kept_phrases_never_hold_the_prompt_separator():
    assert all(
        "." not in phrase for phrase in filter_phrases(["a.b car", "st. mary's church", "1.5 m box"]).kept
    )


class TestRuleBasedChunker:
    @pytest.mark.parametrize(
        ("question", "options", "expected"),
        [
            (
                (
                    "If the green plant were moved 1 metre straight towards the camera, would it get closer "
                    "to or farther from the green box?"
                ),
                ["farther", "closer"],
                ["green plant", "green box"],
            ),
            (
                "How many boxes can you see in the image?",
                ["1", "2"],
                ["boxes"],
            ),  # quantifier anchor, aux "can"
            (
                "Which of these objects is the biggest?",
                ["red box", "white box", "orange chair"],
                ["red box", "white box", "orange chair"],
            ),  # options start chunks
            (
                "Is the boy in orange clothes left of the gray vehicle?",
                ["yes", "no"],
                ["boy in orange clothes", "gray vehicle"],
            ),  # appearance attached
            (
                "What is the white mug resting on?",
                ["the brown table", "the floor"],
                ["white mug", "brown table"],
            ),
            ("Is the trash can on the left of the sofa?", [], ["trash can", "sofa"]),  # "can" as a noun
            ("Are there cars parked on the street?", [], ["cars", "street"]),  # existential anchor
            ("There is a lamp behind the sofa.", [], ["lamp", "sofa"]),  # existential statement
        ],
    )
    def test_chunks_through_the_filter(self, question, options, expected):
        assert filter_phrases(RuleBasedChunker().candidates(question, options)).kept == expected

    def test_name_carries_the_rules_version(self):
        assert RuleBasedChunker().name.startswith("rules@")


def _parsed(words, pos, deps, heads):
    return Doc(spacy.blank("en").vocab, words=words, pos=pos, deps=deps, heads=heads)


class TestSpacyNounChunks:
    """The trained-pipeline path, on documents parsed by hand (no model is installed in tests)."""

    def test_appearance_phrase_is_attached(self):
        doc = _parsed(
            ["the", "boy", "in", "orange", "clothes", "runs"],
            ["DET", "NOUN", "ADP", "ADJ", "NOUN", "VERB"],
            ["det", "nsubj", "prep", "amod", "pobj", "ROOT"],
            [1, 5, 1, 4, 2, 5],
        )
        assert chunks_from_doc(doc) == ["the boy in orange clothes"]

    def test_relational_phrase_is_not_attached(self):
        doc = _parsed(
            ["the", "cup", "on", "the", "table"],
            ["DET", "NOUN", "ADP", "DET", "NOUN"],
            ["det", "ROOT", "prep", "det", "pobj"],
            [1, 1, 1, 4, 2],
        )
        assert chunks_from_doc(doc) == ["the cup", "the table"]

    def test_appearance_stops_at_the_object_of_the_preposition(self):
        # a real small-model parse: "left of the gray vehicle" hangs under "clothes"
        doc = _parsed(
            ["Is", "the", "boy", "in", "orange", "clothes", "left", "of", "the", "gray", "vehicle", "?"],
            ["AUX", "DET", "NOUN", "ADP", "PROPN", "NOUN", "VERB", "ADP", "DET", "ADJ", "NOUN", "PUNCT"],
            [
                "ROOT",
                "det",
                "nsubj",
                "prep",
                "compound",
                "pobj",
                "acl",
                "prep",
                "det",
                "amod",
                "pobj",
                "punct",
            ],
            [0, 2, 0, 2, 5, 3, 5, 6, 10, 10, 7, 0],
        )
        assert filter_phrases(chunks_from_doc(doc)).kept == ["boy in orange clothes", "gray vehicle"]

    def test_nouns_outside_every_chunk_are_recovered(self):
        # a real small-model parse that makes "box" the root with the question in its left subtree
        doc = _parsed(
            [
                "Which",
                "object",
                "is",
                "taller",
                ":",
                "the",
                "green",
                "box",
                "or",
                "the",
                "teal",
                "plant",
                "?",
            ],
            [
                "DET",
                "NOUN",
                "AUX",
                "ADJ",
                "PUNCT",
                "DET",
                "PROPN",
                "PROPN",
                "CCONJ",
                "DET",
                "ADJ",
                "NOUN",
                "PUNCT",
            ],
            [
                "det",
                "nsubj",
                "ccomp",
                "acomp",
                "punct",
                "det",
                "compound",
                "ROOT",
                "cc",
                "det",
                "amod",
                "conj",
                "punct",
            ],
            [1, 2, 7, 2, 7, 7, 7, 7, 7, 11, 11, 7, 7],
        )
        assert filter_phrases(chunks_from_doc(doc)).kept == ["green box", "teal plant"]

    def test_can_tagged_as_an_auxiliary_stays_a_noun(self):
        doc = _parsed(
            ["is", "the", "white", "trash", "can", "to", "the", "left", "?"],
            ["AUX", "DET", "ADJ", "NOUN", "AUX", "ADP", "DET", "NOUN", "PUNCT"],
            ["ROOT", "det", "amod", "compound", "nsubj", "prep", "det", "pobj", "punct"],
            [0, 4, 3, 4, 0, 4, 7, 5, 0],
        )
        assert filter_phrases(chunks_from_doc(doc)).kept == ["white trash can"]
        option = _parsed(
            ["white", "trash", "can"], ["PROPN", "PROPN", "AUX"], ["amod", "nsubj", "ROOT"], [1, 2, 2]
        )
        assert filter_phrases(chunks_from_doc(option)).kept == ["white trash can"]

    def test_extractor_runs_question_and_options(self):
        docs = {
            "Is the cup on the table?": _parsed(
                ["Is", "the", "cup", "on", "the", "table", "?"],
                ["AUX", "DET", "NOUN", "ADP", "DET", "NOUN", "PUNCT"],
                ["ROOT", "det", "nsubj", "prep", "det", "pobj", "punct"],
                [0, 2, 0, 2, 5, 3, 0],
            ),
            "the red mug": _parsed(
                ["the", "red", "mug"], ["DET", "ADJ", "NOUN"], ["det", "amod", "ROOT"], [2, 2, 2]
            ),
        }
        extractor = SpacyNounChunker(docs.__getitem__, "spacy/test@0")
        assert filter_phrases(extractor.candidates("Is the cup on the table?", ["the red mug"])).kept == [
            "cup",
            "table",
            "red mug",
        ]


def test_offline_extractor_falls_back_to_rules_without_a_trained_pipeline(monkeypatch):
    import importlib.util

    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *args: None)
    assert isinstance(load_offline_extractor(None), RuleBasedChunker)
    assert isinstance(load_offline_extractor("rules"), RuleBasedChunker)


def test_a_named_pipeline_that_is_missing_is_an_error():
    with pytest.raises(OSError):
        load_offline_extractor("no_such_spacy_pipeline_xyz")


@pytest.mark.parametrize(
    ("task_type", "sub_task_type", "skip", "expected"),
    [
        ("Complex_Logic", "Pattern_Recognition", ["Pattern_Recognition"], True),  # sub-task name
        ("Complex_Logic", "Pattern_Recognition", ["complex logic"], True),  # task name, spaces and case
        (
            "Complex_Logic",
            "Geometric_Reasoning",
            ["Complex_Logic/Pattern_Recognition"],
            False,
        ),  # other sub-task
        ("Complex_Logic", "Pattern_Recognition", ["Complex_Logic/Pattern_Recognition"], True),  # full name
        ("Perspective_Taking", "Egocentric", [], False),  # empty list skips nothing
    ],
)
def test_skip_list(task_type, sub_task_type, skip, expected):
    assert is_skipped_task(task_type, sub_task_type, skip) is expected


def test_prompt_lists_options_with_letters():
    assert render_phrase_prompt("Where?", ["a cup", "a dog"]).splitlines() == [
        "Question: Where?",
        "Options:",
        "A. a cup",
        "B. a dog",
    ]


def _questions(rows):
    base = {"options": [], "sub_task_type": "S", "split": "train", "source": "omnispatial", "task_type": "T"}
    return pl.DataFrame([{**base, **row} for row in rows])


def test_table_from_the_offline_backend_satisfies_the_contract():
    questions = _questions(
        [
            {"question_id": "q1", "question": "Is the red mug left of the laptop?"},
            {
                "question_id": "q2",
                "question": "How many patterns repeat?",
                "task_type": "Complex_Logic",
                "sub_task_type": "Pattern_Recognition",
            },
            {"question_id": "q3", "question": "Which way is north?"},
        ]
    )
    extraction = extract_object_phrases(questions, PhraseSettings(spacy_model="rules"), progress=False)
    frame = extraction.frame
    assert frame["phrases"].to_list() == [["red mug", "laptop"], [], []]
    assert frame["skipped"].to_list() == [False, True, False]
    assert frame["extractor"].unique().to_list() == ["rules@2+objects@1"]
    assert check_frame(frame, ObjectPhrases).passed
    assert len(extraction.quarantine) == 0


def test_openai_backend_needs_a_client():
    with pytest.raises(ValueError, match="phrase_llm"):
        extract_object_phrases(
            _questions([{"question_id": "q", "question": "?"}]), PhraseSettings(backend="openai")
        )


def test_unknown_backend_is_refused():
    with pytest.raises(ValueError, match="backend"):
        PhraseSettings(backend="claude")


class TestObjectVocabularyFilter:
    """The offline backend keeps only phrases whose head names a physical object category."""

    @pytest.mark.parametrize(
        ("cleaned", "expected"),
        [
            ("bit", None),  # "a bit to the left"
            ("distance remain constant", None),  # no object word at all
            ("spoon relative", "spoon"),  # trailing non-object words cut
            ("camera rotates", None),  # cut to "camera": the viewer, not an object
            ("traffic lights", "traffic lights"),  # multi-word category, plural
            ("wooden dining table", "wooden dining table"),  # multi-word category with a modifier
            ("boy in orange clothes", "boy in orange clothes"),  # head before the preposition decides
            ("armrest of couch", "couch"),  # an unknown part of a known object
            ("cartesian plane", None),  # ends in an object word, names none
            ("orange", None),  # a colour on its own
            ("lamp shade", "lamp shade"),  # LVIS spells it "lampshade"
        ],
    )
    def test_object_phrase(self, cleaned, expected):
        assert object_phrase(cleaned, default_object_vocabulary())[0] == expected

    def test_filter_with_the_vocabulary(self):
        result = filter_phrases(
            ["red cup", "bit", "cups", "the cup", "laptop screen", "the child's perspective", "side"],
            default_object_vocabulary(),
        )
        assert result.kept == ["red cup", "laptop", "child"]  # "cup" repeats "red cup"
        assert ("bit", DropReason.NOT_AN_OBJECT) in result.dropped

    @pytest.mark.parametrize(
        ("question", "options", "expected"),
        [
            (
                "Move the spoon a bit relative to the cup: does the angle stay constant?",
                [],
                ["spoon", "cup"],
            ),
            (
                "Which object is closer to the camera taking this photo, the lamp (highlighted by a red box) or "
                "the sofa (highlighted by a blue box)?",
                ["lamp", "sofa"],
                ["lamp", "sofa"],
            ),  # the drawn boxes are no objects
            (
                "Which of these objects (chair, table, bed, lamp) is the closest to the tv?",
                [],
                ["chair", "table", "bed", "lamp", "tv"],
            ),  # list items start chunks
            ("How many chair(s) are in this room?", [], ["chair"]),
            ("Is the glass of water within arm's reach?", [], ["glass of water"]),  # idiom dropped
            ("From the bird's eye view, is the pool left of the house?", [], ["pool", "house"]),
            (
                "Imagine you are the driver of the white car. Is the bus on your left?",
                [],
                ["driver of the white car", "bus"],
            ),
            (
                "If you extended your right arm, which would you reach first?",
                ["the mug", "the pen"],
                ["mug", "pen"],
            ),
        ],
    )
    def test_rule_based_backend(self, question, options, expected):
        backend = OfflinePhraseBackend(RuleBasedChunker(), default_object_vocabulary())
        assert backend.phrases(question, options) == expected

    def test_box_annotations_and_idioms_are_removed(self):
        text = "Is the lamp (highlighted by a red box) outlined in a green rectangle, within arm's reach?"
        assert "box" not in remove_non_object_text(text) and "arm" not in remove_non_object_text(text)

    def test_the_vocabulary_can_be_switched_off(self):
        class WithoutVocabulary(PhraseSettings):  # a constant of the method, overridden here
            object_vocabulary = False

        questions = _questions([{"question_id": "q1", "question": "Is the cup a bit left of the laptop?"}])
        kept = extract_object_phrases(questions, PhraseSettings(spacy_model="rules"), progress=False)
        everything = extract_object_phrases(questions, WithoutVocabulary(spacy_model="rules"), progress=False)
        assert kept.frame["phrases"].to_list() == [["cup", "laptop"]]
        assert everything.frame["phrases"].to_list() == [["cup", "bit", "laptop"]]
        assert everything.frame["extractor"].to_list() == ["rules@2"]
        assert kept.drop_reasons[DropReason.NOT_AN_OBJECT] == 1

    def test_spacy_chunks_over_a_comma_list_are_split(self):
        doc = _parsed(
            ["chair", ",", "table", ",", "lamp"],
            ["NOUN", "PUNCT", "NOUN", "PUNCT", "NOUN"],
            ["compound", "punct", "compound", "punct", "ROOT"],
            [4, 4, 4, 4, 4],
        )
        extractor = SpacyNounChunker(lambda text: doc, "spacy/test@0")
        assert extractor.candidates("chair, table, lamp", []) == ["chair", "table", "lamp"]
