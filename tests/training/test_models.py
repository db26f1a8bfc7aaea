"""Model loading by family, the processor without torchvision, and the paper's LoRA set-up."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch
from peft import get_peft_model
from transformers import AutoModelForImageTextToText

from data_contracts.boxes import UnknownModelFamilyError
from training.models import (
    SpatialModelConfig,
    build_lora_config,
    detect_family,
    family_of_model_type,
    load_processor,
    prepare_policy,
    resize_rule_of,
)


def test_family_detection(tiny_qwen3_vl, tiny_qwen2_5_vl, tmp_path):
    assert detect_family(tiny_qwen3_vl) == "qwen3_vl"
    assert detect_family(tiny_qwen2_5_vl) == "qwen2_5_vl"
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "llava"}))
    with pytest.raises(UnknownModelFamilyError, match="unknown model family 'llava'"):
        detect_family(tmp_path)
    assert family_of_model_type("qwen3_vl_moe") == "qwen3_vl"


def test_processor_needs_no_torchvision(tiny_qwen3_vl):
    code = (
        "import sys\n"
        "from training.models import load_processor\n"
        f"processor = load_processor({str(tiny_qwen3_vl)!r}, 'qwen3_vl')\n"
        "assert 'torchvision' not in sys.modules, 'torchvision imported'\n"
        "assert not hasattr(processor, 'video_processor') or processor.video_processor is None\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, result.stderr[-2000:]


def test_processor_pads_left_and_matches_the_model(tiny_qwen2_5_vl):
    processor = load_processor(tiny_qwen2_5_vl, "qwen2_5_vl")
    assert processor.tokenizer.padding_side == "left"
    rule = resize_rule_of(processor)
    assert rule.factor == 28 and rule.max_pixels == 4 * 28 * 28


def _model(model_dir):
    return AutoModelForImageTextToText.from_pretrained(model_dir)


def _ranks(peft_model) -> dict[str, tuple[int, float]]:
    return {
        name: (module.r["default"], module.lora_alpha["default"])
        for name, module in peft_model.named_modules()
        if hasattr(module, "lora_A") and "default" in getattr(module, "r", {})
    }


@pytest.mark.parametrize("family", ["qwen3_vl", "qwen2_5_vl"])
def test_lora_on_every_language_and_vision_linear_layer(family, tiny_qwen3_vl, tiny_qwen2_5_vl):
    model = _model(tiny_qwen3_vl if family == "qwen3_vl" else tiny_qwen2_5_vl)
    linear = {name for name, module in model.named_modules() if isinstance(module, torch.nn.Linear)}
    config = build_lora_config(model, SpatialModelConfig(use_peft=True, lora_r=32, lora_alpha=64))
    ranks = _ranks(get_peft_model(model, config))
    adapted = {name.removeprefix("base_model.model.") for name in ranks}
    assert adapted == linear - {"lm_head"}
    for name, (rank, alpha) in ranks.items():
        assert (rank, alpha) == ((4, 8) if ".visual." in name else (32, 64)), name


def test_vision_lora_switch(tiny_qwen3_vl):
    model = _model(tiny_qwen3_vl)
    config = build_lora_config(model, SpatialModelConfig(use_peft=True, vision_lora=False))
    assert not any(".visual." in name for name in _ranks(get_peft_model(model, config)))


def test_full_fine_tuning_can_freeze_vision(tiny_qwen3_vl):
    model, config = prepare_policy(
        _model(tiny_qwen3_vl), SpatialModelConfig(use_peft=False, freeze_vision=True)
    )
    assert config is None
    trainable = {name for name, parameter in model.named_parameters() if parameter.requires_grad}
    assert trainable and not any("visual" in name for name in trainable)


def test_initial_adapter_is_loaded_into_the_full_lora_setup(tiny_qwen3_vl, tmp_path):
    language_only = SpatialModelConfig(use_peft=True, lora_r=4, lora_alpha=8, vision_lora=False)
    model = _model(tiny_qwen3_vl)
    sft = get_peft_model(model, build_lora_config(model, language_only))
    for name, parameter in sft.named_parameters():
        if "lora_B" in name:
            torch.nn.init.normal_(parameter)
    sft.save_pretrained(tmp_path / "adapter")
    expected = {name: p.detach().clone() for name, p in sft.named_parameters() if "lora_" in name}

    run = SpatialModelConfig(
        model_name_or_path=str(tiny_qwen3_vl),
        use_peft=True,
        lora_r=4,
        lora_alpha=8,
        init_adapter_path=str(tmp_path / "adapter"),
    )
    policy, config = prepare_policy(_model(tiny_qwen3_vl), run)
    assert config is None
    parameters = dict(policy.named_parameters())
    for name, value in expected.items():
        assert torch.equal(parameters[name], value), name
    assert any(
        ".visual." in name and "lora_B" in name and parameters[name].requires_grad for name in parameters
    )

    with pytest.raises(ValueError, match="does not fit"):
        prepare_policy(
            _model(tiny_qwen3_vl),
            SpatialModelConfig(
                model_name_or_path=str(tiny_qwen3_vl),
                use_peft=True,
                lora_r=8,
                lora_alpha=16,
                init_adapter_path=str(tmp_path / "adapter"),
            ),
        )
