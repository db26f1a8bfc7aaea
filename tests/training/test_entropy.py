"""Token entropies: decoding, coordinate-digit location, generation hook and selective pass."""

from __future__ import annotations

import math
import random

import pytest
import torch
from PIL import Image
from transformers import AutoModelForImageTextToText
from trl.data_utils import prepare_multimodal_messages

from training.entropy import (
    CompletionTokenDecoder,
    GenerationEntropyRecorder,
    coordinate_token_indices,
    scatter_entropies,
    selective_entropy_pass,
    token_entropy,
)
from training.models import load_processor
from training.prompts import build_messages
from training.rewards.confidence import box_uncertainties
from training.testing import build_tiny_tokenizer


class TestTokenEntropy:
    def test_uniform_distribution_has_log_vocab_entropy(self):
        assert float(token_entropy(torch.zeros(3, 7))[0]) == pytest.approx(math.log(7), abs=1e-6)

    def test_matches_definition(self):
        logits = torch.randn(5, 11, dtype=torch.float64)
        probabilities = logits.softmax(-1)
        expected = -(probabilities * probabilities.log()).sum(-1)
        assert torch.allclose(token_entropy(logits).double(), expected, atol=1e-5)


@pytest.fixture(scope="module")
def tokenizer():
    return build_tiny_tokenizer()


class TestCompletionTokenDecoder:
    def test_concatenation_is_the_decoded_text_for_random_ids(self, tokenizer):
        decoder = CompletionTokenDecoder(tokenizer)
        generator = random.Random(0)
        for _ in range(300):
            # ids beyond the tokenizer (padded embedding rows) included, as a random policy emits them
            ids = [generator.randrange(len(tokenizer) + 20) for _ in range(generator.randrange(1, 40))]
            tokens = decoder.decode(ids)
            assert len(tokens) == len(ids)
            assert "".join(tokens) == tokenizer.decode(ids, skip_special_tokens=True)

    def test_special_tokens_decode_to_nothing_and_think_tag_survives(self, tokenizer):
        ids = tokenizer("[7]</think>B<|im_end|>", add_special_tokens=False)["input_ids"]
        assert CompletionTokenDecoder(tokenizer).decode(ids) == ["[", "7", "]", "</think>", "B", ""]

    def test_multibyte_characters_go_to_the_completing_token(self, tokenizer):
        ids = tokenizer("日本 [12]", add_special_tokens=False)["input_ids"]
        tokens = CompletionTokenDecoder(tokenizer).decode(ids)
        assert "".join(tokens) == "日本 [12]"
        assert tokens[-3:] == ["1", "2", "]"]


class TestCoordinateTokenIndices:
    def test_only_digits_of_valid_reasoning_boxes(self):
        tokens = [
            '{"bbox_2d": [',
            "1",
            "2",
            ", ",
            "3",
            "4",
            ", ",
            "5",
            "6",
            ", ",
            "7",
            "8",
            '], "label": "cup"}\n',
            # malformed box (two coordinates): not grounding
            '{"bbox_2d": [',
            "9",
            ", ",
            "9",
            '], "label": "bad"}\n',
            "</think>",
            # a box after </think>: not grounding
            '{"bbox_2d": [',
            "1",
            ", ",
            "2",
            ", ",
            "3",
            ", ",
            "4",
            '], "label": "x"}',
            "A",
        ]
        indices = coordinate_token_indices(tokens)
        assert [tokens[index] for index in indices] == list("12345678")
        assert indices == [1, 2, 4, 5, 7, 8, 10, 11]

    def test_entries_line_up_with_the_reward_uncertainties(self):
        tokens = [
            '{"bbox_2d": [',
            "1",
            "0",
            ", ",
            "2",
            "0",
            ", ",
            "3",
            "0",
            ", ",
            "4",
            "0",
            '], "label": "cup"}',
            "</think>A",
        ]
        positions = coordinate_token_indices(tokens)
        entropies = scatter_entropies(len(tokens), positions, [math.log(10)] * len(positions))
        assert box_uncertainties(tokens, entropies) == [pytest.approx(1.0)]

    def test_no_boxes_no_positions(self):
        assert coordinate_token_indices(["just text", "</think>", "B"]) == []


def _prompt_inputs(processor, family, row_image):
    row = {
        "question": "Where is the red chair?",
        "options": ["left", "right"],
        "image_width": 64,
        "image_height": 48,
    }
    messages = prepare_multimodal_messages(build_messages("spatialcore", row, family), images=[row_image])
    return processor.apply_chat_template(
        messages, add_generation_prompt=True, tokenize=True, return_dict=True, return_tensors="pt"
    )


def _full_forward_entropies(model, prompt_inputs, completion_ids):
    input_ids = torch.cat([prompt_inputs["input_ids"], completion_ids.unsqueeze(0)], dim=1)
    mm_token_type_ids = torch.cat(
        [prompt_inputs["mm_token_type_ids"], torch.zeros_like(completion_ids).unsqueeze(0)], dim=1
    )
    with torch.no_grad():
        logits = model(
            input_ids=input_ids,
            attention_mask=torch.ones_like(input_ids),
            pixel_values=prompt_inputs["pixel_values"],
            image_grid_thw=prompt_inputs["image_grid_thw"],
            mm_token_type_ids=mm_token_type_ids,
        ).logits
    prompt_length = prompt_inputs["input_ids"].shape[1]
    return token_entropy(logits[0, prompt_length - 1 : -1])


@pytest.mark.parametrize("family", ["qwen3_vl", "qwen2_5_vl"])
def test_generation_hook_and_selective_pass_equal_a_full_forward(family, tiny_qwen3_vl, tiny_qwen2_5_vl):
    model_dir = tiny_qwen3_vl if family == "qwen3_vl" else tiny_qwen2_5_vl
    processor = load_processor(model_dir, family)
    model = AutoModelForImageTextToText.from_pretrained(model_dir).eval()
    image = Image.new("RGB", (64, 48), (120, 40, 200))
    inputs = _prompt_inputs(processor, family, image)
    torch.manual_seed(0)
    with GenerationEntropyRecorder(model) as recorder, torch.no_grad():
        generated = model.generate(**inputs, max_new_tokens=12, do_sample=True, temperature=0.7, top_k=5)
    completion = generated[0, inputs["input_ids"].shape[1] :]
    recorded = recorder.entropies()[0, : completion.shape[0]]
    # the hook sees the untempered, unfiltered distribution (temperature and top-k do not change it)
    expected = _full_forward_entropies(model, inputs, completion)
    assert torch.allclose(recorded, expected, atol=1e-4)

    positions = [3, 5, completion.shape[0] - 1]
    prompt_length = inputs["input_ids"].shape[1]
    input_ids = torch.cat([inputs["input_ids"], completion.unsqueeze(0)], dim=1)
    forward_kwargs = {
        "pixel_values": inputs["pixel_values"],
        "image_grid_thw": inputs["image_grid_thw"],
        "mm_token_type_ids": torch.cat(
            [inputs["mm_token_type_ids"], torch.zeros_like(completion).unsqueeze(0)], 1
        ),
    }
    selected = selective_entropy_pass(
        model, input_ids, torch.ones_like(input_ids), [[prompt_length + p for p in positions]], forward_kwargs
    )[0]
    assert torch.allclose(selected, expected[positions], atol=1e-4)
