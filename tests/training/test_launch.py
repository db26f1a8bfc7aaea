"""`python -m training.launch`: every shipped accelerate config launches the smoke recipe on the CPU,
or says in one sentence what is missing; `spatial-train` names a missing GPU package the same way."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from training.cli import main
from training.launch import cpu_variant, recipe_settings, split_arguments
from training.requirements import is_installed, launch_problem, recipe_problem

REPOSITORY_ROOT = Path(__file__).resolve().parents[2]
RECIPES_DIR = REPOSITORY_ROOT / "training" / "recipes"
ACCELERATE_CONFIGS = sorted((RECIPES_DIR / "accelerate").glob("*.yaml"))
SMOKE = str(RECIPES_DIR / "smoke.yaml")
GPU_EXTRA = "install the gpu extra (pip install -e '.[gpu]')"


def _settings(config: Path) -> dict:
    return yaml.safe_load(config.read_text())


def test_the_shipped_configs():
    names = {config.name for config in ACCELERATE_CONFIGS}
    assert names == {"single_gpu.yaml", "multi_gpu_2.yaml", "zero3_8gpu.yaml", "multi_node_zero3.yaml"}


@pytest.mark.parametrize("config", ACCELERATE_CONFIGS, ids=[config.name for config in ACCELERATE_CONFIGS])
def test_cpu_variant_keeps_the_engine(config):
    settings = _settings(config)
    variant = cpu_variant(settings)
    assert variant["use_cpu"] is True and variant["num_machines"] == 1 and variant["mixed_precision"] == "no"
    per_machine = settings["num_processes"] // settings["num_machines"]
    assert variant["num_processes"] == min(per_machine, 2)
    if settings["distributed_type"] != "NO":
        assert variant["distributed_type"] == settings["distributed_type"]
    assert variant.get("deepspeed_config") == settings.get("deepspeed_config")


def test_a_zero3_config_without_deepspeed_is_one_sentence(monkeypatch):
    monkeypatch.setattr("training.requirements.is_installed", lambda package: package != "deepspeed")
    problem = launch_problem(
        _settings(RECIPES_DIR / "accelerate" / "zero3_8gpu.yaml"), "zero3_8gpu.yaml", cpu=True
    )
    assert problem == f"zero3_8gpu.yaml runs DeepSpeed ZeRO-3, but deepspeed is not installed: {GPU_EXTRA}."


def test_gpu_configs_need_their_gpus(monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    problem = launch_problem(
        _settings(RECIPES_DIR / "accelerate" / "multi_gpu_2.yaml"), "multi_gpu_2.yaml", cpu=False
    )
    assert problem == (
        "multi_gpu_2.yaml starts 2 processes per machine, one per GPU, but this machine has 0 CUDA GPUs; "
        "add --cpu for its CPU variant."
    )


def test_recipe_problems(monkeypatch):
    monkeypatch.setattr("training.requirements.is_installed", lambda package: False)
    assert recipe_problem("flash_attention_2", use_vllm=True, use_cpu=False) == (
        "the recipe sets attn_implementation: flash_attention_2, but flash-attn is not installed: install it "
        "after the gpu extra (pip install flash-attn==2.8.3.post2 --no-build-isolation) or pass "
        "--attn_implementation sdpa."
    )
    assert recipe_problem("sdpa", use_vllm=True, use_cpu=False) == (
        f"the recipe sets use_vllm: true, but vllm is not installed: {GPU_EXTRA} or pass --use_vllm false."
    )
    monkeypatch.setenv("ACCELERATE_USE_DEEPSPEED", "true")
    assert "deepspeed is not installed" in recipe_problem(None, use_vllm=False, use_cpu=False)


def test_split_and_recipe_settings():
    launcher, command, rest = split_arguments(
        ["--config_file", "a.yaml", "--cpu", "sft", "--config", SMOKE, "--use_vllm", "true"]
    )
    assert (launcher, command) == (["--config_file", "a.yaml", "--cpu"], "sft")
    assert recipe_settings(rest) == {"attn_implementation": None, "use_vllm": True, "use_cpu": True}
    spatialcore = recipe_settings(["--config", str(RECIPES_DIR / "spatialcore_8b.yaml")])
    assert spatialcore == {"attn_implementation": "flash_attention_2", "use_vllm": True, "use_cpu": False}


@pytest.mark.skipif(is_installed("flash_attn"), reason="flash-attn is installed")
def test_spatial_train_names_a_missing_gpu_package(caplog, tiny_tables):
    # the data root holds the recipe's table (a missing one is answered first, before TRL is imported)
    recipe = str(RECIPES_DIR / "spatialcore_8b.yaml")
    data = ["--data_root", str(tiny_tables)]
    assert main(["grpo", "--config", recipe, *data, "--bf16", "false"]) == 2
    assert "but flash-attn is not installed" in caplog.text
    assert main(["grpo", "--config", recipe, *data, "--use_cpu", "true"]) == 2
    assert "flash_attention_2 needs a CUDA GPU" in caplog.text


def test_a_gpu_recipe_on_a_machine_without_gpu_is_one_line(caplog, tiny_tables):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    recipe = str(RECIPES_DIR / "spatialcore_8b.yaml")
    assert main(["grpo", "--config", recipe, "--data_root", str(tiny_tables)]) == 2
    assert "the recipe cannot be used here" in caplog.text and "bf16" in caplog.text


@pytest.mark.slow
@pytest.mark.timeout(1200)
@pytest.mark.parametrize("config", ACCELERATE_CONFIGS, ids=[config.name for config in ACCELERATE_CONFIGS])
def test_every_accelerate_config_launches_the_smoke_recipe_on_the_cpu(
    config, tiny_qwen3_vl, tiny_tables, tmp_path
):
    settings = _settings(config)
    output_dir = tmp_path / "out"
    command = [
        sys.executable,
        "-m",
        "training.launch",
        "--config_file",
        str(config),
        "--cpu",
        "grpo",
        "--config",
        SMOKE,
        "--model_name_or_path",
        str(tiny_qwen3_vl),
        "--data_root",
        str(tiny_tables),
        "--output_dir",
        str(output_dir),
        "--max_steps",
        "1",
        "--max_completion_length",
        "16",
        "--save_strategy",
        "no",
        "--report_to",
        "none",
    ]
    result = subprocess.run(
        command, capture_output=True, text=True, timeout=1100, cwd=REPOSITORY_ROOT, check=False
    )
    if settings["distributed_type"] == "DEEPSPEED" and not is_installed("deepspeed"):
        assert result.returncode == 2
        assert [line for line in result.stderr.splitlines() if line.strip()] == [
            f"training.launch: {config.name} runs DeepSpeed ZeRO-3, but deepspeed is not installed: {GPU_EXTRA}."
        ]
        return
    assert result.returncode == 0, result.stderr[-4000:]
    assert (output_dir / "adapter_model.safetensors").is_file()
    processes = cpu_variant(settings)["num_processes"]
    assert result.stderr.count("INFO training.cli: saved the policy to") == processes
