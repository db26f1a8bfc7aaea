"""Prompts of the three formats and their coordinate conventions."""

from __future__ import annotations

import pytest

from data_contracts.boxes import UnknownModelFamilyError
from training.prompts import as_option_list, build_messages, spatialthinker_question

SPATIALCORE_ROW = {"question": "Which object is nearer?", "options": ["the cup", "the lamp", "the sofa"]}


class TestSpatialCorePrompt:
    def test_system_prompt_states_the_format(self):
        system, user = build_messages("spatialcore", SPATIALCORE_ROW, "qwen3_vl")
        assert system["role"] == "system" and user["role"] == "user"
        for phrase in ('{"bbox_2d": [x1, y1, x2, y2], "label":', "</think> exactly once", "only the letter"):
            assert phrase in system["content"]
        # Qwen3-VL-Thinking's template opens <think> itself
        assert "Begin your response with <think>" not in system["content"]
        assert user["content"].endswith("A. the cup\nB. the lamp\nC. the sofa")

    @pytest.mark.parametrize(
        ("family", "wording"),
        [
            ("qwen3_vl", "0-1000 grid"),
            ("qwen2_vl", "0-1000 grid"),
            ("qwen2_5_vl", "absolute pixel coordinates"),
        ],
    )
    def test_coordinates_follow_the_family(self, family, wording):
        assert wording in build_messages("spatialcore", SPATIALCORE_ROW, family)[0]["content"]

    def test_non_thinking_family_is_asked_to_open_think(self):
        assert (
            "Begin your response with <think>"
            in build_messages("spatialcore", SPATIALCORE_ROW, "qwen2_5_vl")[0]["content"]
        )

    def test_options_drawn_in_the_image(self):
        user = build_messages("spatialcore", {"question": "Which?", "options": []}, "qwen3_vl")[1]["content"]
        assert "options A-D are shown in the image" in user


def test_spatialthinker_prompt_has_the_original_image_size():
    row = {
        "question_with_options": "Is the cup left?\n(A) yes\n(B) no",
        "image_width": 800,
        "image_height": 600,
    }
    (user,) = build_messages("spatialthinker", row, "qwen2_5_vl")
    assert "Image size: (800 x 600)" in user["content"]
    assert user["content"].endswith("Q. Is the cup left?\n(A) yes\n(B) no")
    assert "<observe>" in user["content"] and "<answer> (A) cat </answer>" in user["content"]


def test_spatialthinker_prompt_is_the_stvqa_problem_without_the_image_placeholder():
    row = {
        "problem": "<image> Observe... Image size: (8 x 6)\nQ. Is it red?",
        "image_width": 8,
        "image_height": 6,
    }
    (user,) = build_messages("spatialthinker", row, "qwen2_5_vl")
    assert user["content"] == "Observe... Image size: (8 x 6)\nQ. Is it red?"


def test_spatialthinker_question_from_parts():
    row = {"question_only": "Is it red?", "options": ["yes", "no"]}
    assert spatialthinker_question(row) == "Is it red?\nOptions:\n(A) yes\n(B) no"


@pytest.mark.parametrize(
    ("options", "unit", "expected"),
    [
        (["chair", "lamp"], None, "A. chair\nB. lamp"),
        ([], "m", "<answer>2.5 m</answer>"),
    ],
)
def test_dge_prompt(options, unit, expected):
    (user,) = build_messages("dge", {"question": "How far?", "options": options, "unit": unit}, "qwen2_5_vl")
    assert expected in user["content"] and "<think>" in user["content"]


def test_unknown_format_and_family():
    with pytest.raises(ValueError, match="unknown prompt format"):
        build_messages("llava", SPATIALCORE_ROW, "qwen3_vl")
    with pytest.raises(UnknownModelFamilyError):
        build_messages("spatialcore", SPATIALCORE_ROW, "llava")


def test_options_from_json_text():
    assert as_option_list('["a", "b"]') == ["a", "b"]
