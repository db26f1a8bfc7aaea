"""SFT cold start: target completions, prompt masking, and a tiny run whose adapter starts GRPO."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from trl import SFTConfig

from data_contracts.boxes import to_model_convention
from data_contracts.sft_cold_start import SftColdStart
from training.cli import main
from training.models import SpatialModelConfig
from training.rewards import score_spatialcore
from training.rewards.parsing import parse_spatialcore
from training.sft import SpatialSFTArguments, build_sft_frame, build_sft_targets, build_sft_trainer
from training.testing import tiny_training_frames

RECIPES_DIR = Path(__file__).resolve().parents[2] / "training" / "recipes"

ROW = {
    "question": "Where is the red chair relative to the blue lamp?",
    "options": ["left of the lamp", "right of the lamp"],
    "answer": "B",
    "image_width": 640,
    "image_height": 480,
    "pseudo_gt": [
        {"bbox_2d": [80, 420, 330, 900], "label": "red chair", "validity": 0.9},
        {"bbox_2d": [560, 120, 760, 640], "label": "blue lamp", "validity": 0.6},
    ],
}


class TestBuildSftTargets:
    def test_target_is_a_perfect_spatialcore_completion(self):
        target = build_sft_targets([ROW], family="qwen3_vl")[0]
        parse = parse_spatialcore(target)
        assert parse.answer_letter == "B" and parse.has_valid_structure
        assert [box.coords for box in parse.grounding_boxes] == [(80, 420, 330, 900), (560, 120, 760, 640)]
        score = score_spatialcore(
            target, answer="B", options=ROW["options"], question=ROW["question"], pseudo_gt=ROW["pseudo_gt"]
        )
        assert score.answer == 1.0 and score.format == 1.0 and score.n_matched == 2

    def test_box_lines_use_the_family_convention(self):
        target = build_sft_targets([ROW], family="qwen2_5_vl")[0]
        first_line = json.loads(target.splitlines()[0])
        assert first_line["bbox_2d"] == to_model_convention([80, 420, 330, 900], "qwen2_5_vl", 640, 480)

    def test_no_pseudo_gt_means_no_box_lines(self):
        target = build_sft_targets([{**ROW, "pseudo_gt": []}])[0]
        assert "bbox_2d" not in target and target.endswith("</think>\n\nB")

    def test_reasoning_from_a_backend(self):
        target = build_sft_targets([ROW], reasoning_fn=lambda row, boxes: f"{len(boxes)} boxes seen.")[0]
        assert "\n2 boxes seen.\n</think>" in target

    def test_bad_gold_letter_raises(self):
        with pytest.raises(ValueError):
            build_sft_targets([{**ROW, "answer": "E"}])

    def test_frame_selection_is_seeded_and_adds_the_completion(self):
        frame = tiny_training_frames(rows=8)["spatialcore_train"]
        first = build_sft_frame(frame, samples=3, seed=1)
        again = build_sft_frame(frame, samples=3, seed=1)
        assert first["question_id"].to_list() == again["question_id"].to_list()
        assert first.height == 3 and all(text.endswith(("A", "B", "C", "D")) for text in first["completion"])
        valid, failure = SftColdStart.filter(first, cast=True)
        assert valid.height == 3, failure.counts()


def test_sft_masks_the_prompt_tokens(tiny_qwen3_vl, tiny_tables, tmp_path):
    arguments = SpatialSFTArguments(
        data_root=str(tiny_tables), dataset_table="spatialcore_train", max_train_samples=2
    )
    config = SFTConfig(
        output_dir=str(tmp_path / "sft"),
        use_cpu=True,
        bf16=False,
        report_to="none",
        per_device_train_batch_size=2,
        gradient_checkpointing=False,
    )
    model_args = SpatialModelConfig(
        model_name_or_path=str(tiny_qwen3_vl), use_peft=True, lora_r=4, lora_alpha=8, vision_lora=False
    )
    trainer = build_sft_trainer(arguments, config, model_args)
    examples = [trainer.train_dataset[index] for index in range(2)]
    targets = [example["completion"][0]["content"] for example in examples]
    batch = trainer.data_collator(examples)
    tokenizer = trainer.processing_class.tokenizer
    for row in range(2):
        trained = batch["labels"][row] != -100
        # the trained tokens are exactly the completion (and the turn's end), never the prompt or the image
        assert tokenizer.decode(batch["input_ids"][row][trained]) == targets[row] + "<|im_end|>\n"
        first_trained = int(trained.nonzero()[0])
        assert not trained[:first_trained].any()
        assert (batch["mm_token_type_ids"][row][trained] == 0).all()
    # vision frozen, language adapted
    trainable = [name for name, p in trainer.model.named_parameters() if p.requires_grad]
    assert trainable and all("language_model" in name and "lora_" in name for name in trainable)


@pytest.mark.slow
def test_sft_cli_adapter_initialises_grpo(tiny_qwen3_vl, tiny_tables, tmp_path):
    sft_dir = tmp_path / "sft"
    status = main(
        [
            "sft",
            "--config",
            str(RECIPES_DIR / "smoke_sft.yaml"),
            "--model_name_or_path",
            str(tiny_qwen3_vl),
            "--data_root",
            str(tiny_tables),
            "--output_dir",
            str(sft_dir),
            "--report_to",
            "none",
        ]
    )
    assert status == 0
    adapter = load_file(str(sft_dir / "adapter_model.safetensors"))
    assert adapter and not any("visual" in key for key in adapter)
    assert any("lora_B" in key and torch.count_nonzero(value) for key, value in adapter.items())

    grpo_dir = tmp_path / "grpo"
    status = main(
        [
            "grpo",
            "--config",
            str(RECIPES_DIR / "smoke.yaml"),
            "--model_name_or_path",
            str(tiny_qwen3_vl),
            "--data_root",
            str(tiny_tables),
            "--output_dir",
            str(grpo_dir),
            "--init_adapter_path",
            str(sft_dir),
            "--max_steps",
            "1",
            "--report_to",
            "none",
            "--save_strategy",
            "no",
            "--max_completion_length",
            "16",
        ]
    )
    assert status == 0
    policy = load_file(str(grpo_dir / "adapter_model.safetensors"))
    # the language layers start from the cold start, the vision layers are added for GRPO
    assert any("visual" in key for key in policy)
    shared = [key for key in adapter if key in policy and "lora_A" in key]
    assert shared
