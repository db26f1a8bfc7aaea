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
from training.sft import (
    SequenceTooLongError,
    SpatialSFTArguments,
    build_sft_frame,
    build_sft_targets,
    build_sft_trainer,
)
from training.testing import build_tiny_image_processor, tiny_training_frames, write_tiny_training_tables

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


@pytest.fixture(scope="module")
def qwen3_vl_at_full_resolution(tiny_qwen3_vl, tmp_path_factory):
    """The tiny Qwen3-VL with a real pixel budget: a 1280x960 image is 40 x 30 = 1,200 image tokens."""
    import shutil

    folder = tmp_path_factory.mktemp("full_resolution") / "model"
    shutil.copytree(tiny_qwen3_vl, folder)
    build_tiny_image_processor("qwen3_vl", max_pixels=16384 * 32 * 32).save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def large_image_tables(tmp_path_factory):
    return write_tiny_training_tables(
        tmp_path_factory.mktemp("large") / "data", rows=3, image_size=(1280, 960)
    )


def _sft_trainer(model_dir, data_root, tmp_path, **arguments):
    script_args = SpatialSFTArguments(
        data_root=str(data_root), dataset_table="spatialcore_train", max_train_samples=3, **arguments
    )
    config = SFTConfig(
        output_dir=str(tmp_path / "sft"),
        use_cpu=True,
        bf16=False,
        report_to="none",
        per_device_train_batch_size=3,
        gradient_checkpointing=False,
    )
    assert config.max_length == 1024  # TRL's default, which the SFT recipes do not set
    model_args = SpatialModelConfig(
        model_name_or_path=str(model_dir), use_peft=True, lora_r=4, lora_alpha=8, vision_lora=False
    )
    return build_sft_trainer(script_args, config, model_args)


def test_no_sft_target_is_cut_by_the_image_tokens(qwen3_vl_at_full_resolution, large_image_tables, tmp_path):
    trainer = _sft_trainer(qwen3_vl_at_full_resolution, large_image_tables, tmp_path)
    examples = [trainer.train_dataset[index] for index in range(3)]
    targets = [example["completion"][0]["content"] for example in examples]
    batch = trainer.data_collator(examples)
    tokenizer = trainer.processing_class.tokenizer
    image_pad = tokenizer.convert_tokens_to_ids("<|image_pad|>")
    assert int((batch["input_ids"][0] == image_pad).sum()) == 1200
    # the counted length is the collated one, and max_length was set to it: nothing cut
    assert trainer.args.max_length == int(batch["attention_mask"].sum(dim=1).max()) > 1024
    for row in range(3):
        trained = batch["labels"][row] != -100
        assert tokenizer.decode(batch["input_ids"][row][trained]).endswith(
            "</think>\n\n" + targets[row][-1] + "<|im_end|>\n"
        )
        assert tokenizer.decode(batch["input_ids"][row][trained]) == targets[row] + "<|im_end|>\n"


def test_a_max_length_that_cuts_targets_fails_with_the_numbers(
    qwen3_vl_at_full_resolution, large_image_tables, tmp_path, caplog
):
    with pytest.raises(
        SequenceTooLongError, match=r"max_length 1024 cuts the completion of 3 of 3 SFT targets"
    ):
        _sft_trainer(qwen3_vl_at_full_resolution, large_image_tables, tmp_path, max_length_policy="error")
    trainer = _sft_trainer(
        qwen3_vl_at_full_resolution, large_image_tables, tmp_path, max_length_policy="warn"
    )
    assert trainer.args.max_length == 1024
    assert "cuts the completion of 3 of 3 SFT targets" in caplog.text and "image 1199" in caplog.text


def test_sft_recipes_fit_max_length_to_the_data():
    from training.cli import make_sft_parser

    for recipe in sorted(RECIPES_DIR.glob("*sft*.yaml")):
        script_args, _, _ = make_sft_parser().parse_args_and_config(
            ["--config", str(recipe), "--use_cpu", "true"]
        )
        assert script_args.max_length_policy == "fit", recipe.name
