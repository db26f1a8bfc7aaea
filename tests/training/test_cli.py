"""`spatial-train`: recipes, clear errors, the smoke run, resume with the scheduler state."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from training.cli import main, make_grpo_parser, make_sft_parser
from training.testing import (
    DGE_COMPLETIONS,
    SPATIALCORE_COMPLETIONS,
    build_tiny_tokenizer,
    scripted_generation,
)

REPOSITORY_ROOT = Path(__file__).resolve().parents[2]
RECIPES_DIR = REPOSITORY_ROOT / "training" / "recipes"
RECIPES = sorted(path for path in RECIPES_DIR.rglob("*.yaml") if "accelerate" not in path.parts)
SPATIALCORE_8B = str(RECIPES_DIR / "spatialcore_8b.yaml")
SMOKE = str(RECIPES_DIR / "smoke.yaml")


@pytest.mark.parametrize("recipe", RECIPES, ids=[str(path.relative_to(REPOSITORY_ROOT)) for path in RECIPES])
def test_every_recipe_parses(recipe):
    parser = make_sft_parser() if "sft" in recipe.name else make_grpo_parser()
    script_args, training_args, model_args = parser.parse_args_and_config(
        ["--config", str(recipe), "--use_cpu", "true"]
    )
    assert model_args.model_name_or_path


def test_spatialcore_recipe_is_table_4():
    script_args, args, model_args = make_grpo_parser().parse_args_and_config(
        ["--config", SPATIALCORE_8B, "--use_cpu", "true"]
    )
    assert (args.num_generations, args.gradient_accumulation_steps, args.max_completion_length) == (
        4,
        8,
        3072,
    )
    assert args.per_device_train_batch_size // args.num_generations == 2  # 2 prompts per device
    assert (args.learning_rate, args.beta, args.warmup_steps) == (5e-5, 0.01, 0.05)
    assert args.learning_rate * args.lr_scheduler_kwargs["min_lr_rate"] == pytest.approx(5e-6)
    assert args.use_vllm and args.vllm_mode == "colocate"
    assert (model_args.lora_r, model_args.lora_alpha, model_args.lora_dropout) == (32, 64, 0.05)
    assert (model_args.vision_lora_r, model_args.vision_lora_alpha) == (4, 8)
    assert script_args.reward_funcs == ["spatialcore_reward"] and script_args.prompt_format == "spatialcore"


def test_command_line_overrides_the_recipe():
    _, args, _ = make_grpo_parser().parse_args_and_config(
        ["--config", SPATIALCORE_8B, "--use_cpu", "true", "--learning_rate", "1e-5"]
    )
    assert args.learning_rate == 1e-5


def test_help_and_unknown_command(capsys):
    assert main(["--help"]) == 0
    assert "grpo" in capsys.readouterr().out
    assert main(["train"]) == 2
    assert main([]) == 2


def _grpo(model_dir, data_root, output_dir, *extra):
    return main(
        [
            "grpo",
            "--config",
            SMOKE,
            "--model_name_or_path",
            str(model_dir),
            "--data_root",
            str(data_root),
            "--output_dir",
            str(output_dir),
            *extra,
        ]
    )


def test_missing_table_is_a_clear_error(tiny_qwen3_vl, tmp_path, capsys):
    assert _grpo(tiny_qwen3_vl, tmp_path / "empty", tmp_path / "out") == 2
    assert "table 'spatialcore_train' not found" in capsys.readouterr().err


def test_missing_column_is_a_clear_error(tiny_qwen3_vl, tiny_tables, tmp_path, caplog):
    import polars as pl

    table = tiny_tables / "spatialcore_train.parquet"
    pl.read_parquet(table).drop("pseudo_gt").write_parquet(table)
    assert _grpo(tiny_qwen3_vl, tiny_tables, tmp_path / "out") == 2
    assert "lacks column(s) pseudo_gt" in caplog.text


def test_unknown_model_family_is_a_clear_error(tiny_tables, tmp_path, caplog):
    model_dir = tmp_path / "llava"
    model_dir.mkdir()
    (model_dir / "config.json").write_text(json.dumps({"model_type": "gpt2"}))
    assert _grpo(model_dir, tiny_tables, tmp_path / "out") == 2
    assert "unknown model family 'gpt2'" in caplog.text


def test_unknown_reward_is_a_clear_error(tiny_qwen3_vl, tiny_tables, tmp_path, caplog):
    assert _grpo(tiny_qwen3_vl, tiny_tables, tmp_path / "out", "--reward_funcs", "spatialcore_rewrd") == 2
    assert "unknown reward 'spatialcore_rewrd'" in caplog.text


def test_resume_without_checkpoint_is_a_clear_error(tiny_qwen3_vl, tiny_tables, tmp_path, caplog):
    assert _grpo(tiny_qwen3_vl, tiny_tables, tmp_path / "out", "--resume_from_checkpoint", "last") == 2
    assert "no checkpoint to resume from" in caplog.text


@pytest.mark.slow
def test_smoke_recipe_trains_lora_and_writes_tensorboard(tiny_qwen3_vl, tiny_tables, tmp_path):
    output_dir = tmp_path / "smoke"
    with scripted_generation(build_tiny_tokenizer(), SPATIALCORE_COMPLETIONS):
        assert _grpo(tiny_qwen3_vl, tiny_tables, output_dir) == 0
    adapter = load_file(str(output_dir / "adapter_model.safetensors"))
    # LoRA B starts at zero: a non-zero B means the optimizer moved the adapter
    assert any("lora_B" in key and torch.count_nonzero(value) for key, value in adapter.items())
    assert list(output_dir.rglob("events.out.tfevents.*"))
    state = json.loads((output_dir / "checkpoint-2" / "trainer_state.json").read_text())
    logged = {key for entry in state["log_history"] for key in entry}
    assert {
        "spatialcore/answer",
        "spatialcore/spatial",
        "spatialcore/mean_box_entropy",
        "spatialcore/mean_matched_iou",
        "grounding/coordinate_entropy",
    } <= logged


@pytest.mark.slow
def test_resume_continues_steps_and_scheduler_state(tiny_qwen3_vl, tiny_tables, tmp_path):
    output_dir = tmp_path / "dge"
    dge = [
        "--dataset_table",
        "dge_tasks",
        "--reward_funcs",
        "dge_reward",
        "--task_scheduler",
        "true",
        "--per_device_train_batch_size",  # 4 scored completions a step (2 prompts x 2), whatever the smoke recipe says
        "4",
        "--num_generations",
        "2",
        "--max_completion_length",
        "16",
        "--report_to",
        "none",
    ]
    with scripted_generation(build_tiny_tokenizer(), DGE_COMPLETIONS):
        assert _grpo(tiny_qwen3_vl, tiny_tables, output_dir, *dge) == 0
        first = json.loads((output_dir / "checkpoint-1" / "task_scheduler.json").read_text())
        assert first["chunks_consumed"] == 1 and sum(first["scheduler"]["attempts"].values()) == 4
        assert (
            _grpo(
                tiny_qwen3_vl,
                tiny_tables,
                output_dir,
                *dge,
                "--max_steps",
                "3",
                "--resume_from_checkpoint",
                str(output_dir / "checkpoint-1"),
            )
            == 0
        )
    state = json.loads((output_dir / "checkpoint-3" / "trainer_state.json").read_text())
    assert state["global_step"] == 3
    resumed = json.loads((output_dir / "checkpoint-3" / "task_scheduler.json").read_text())
    # checkpoint-1's 4 scored completions plus two more steps of 4
    assert resumed["chunks_consumed"] == 3 and sum(resumed["scheduler"]["attempts"].values()) == 12
    assert (
        resumed["scheduler"]["attempts"]["absolute_distance"]
        >= first["scheduler"]["attempts"]["absolute_distance"]
    )


def test_resolve_checkpoint_aliases(tmp_path):
    from training.grpo_trainer import resolve_checkpoint

    (tmp_path / "checkpoint-2").mkdir()
    (tmp_path / "checkpoint-10").mkdir()
    assert resolve_checkpoint(tmp_path, "last") == str(tmp_path / "checkpoint-10")
    assert resolve_checkpoint(tmp_path, str(tmp_path / "checkpoint-2")) == str(tmp_path / "checkpoint-2")
    assert resolve_checkpoint(tmp_path, None) is None
    with pytest.raises(FileNotFoundError):
        resolve_checkpoint(tmp_path, str(tmp_path / "checkpoint-99"))


DOCUMENTED_RECIPE = re.compile(r"training/recipes/[\w/]+\.yaml")


def test_every_recipe_the_trainer_docs_name_exists():
    """Usage lines in the trainer's docstrings, READMEs and recipe headers name real recipe files."""
    documents = [REPOSITORY_ROOT / "README.md"] + [
        path
        for path in sorted((REPOSITORY_ROOT / "training").rglob("*"))
        if path.suffix in (".py", ".md", ".yaml")
    ]
    missing = [
        f"{document.relative_to(REPOSITORY_ROOT)}: {name}"
        for document in documents
        for name in DOCUMENTED_RECIPE.findall(document.read_text(encoding="utf-8"))
        if not (REPOSITORY_ROOT / name).is_file()
    ]
    assert not missing, "\n".join(missing)


SPATIALCORE_GRPO_RECIPES = sorted(
    path
    for path in RECIPES
    if "sft" not in path.name
    and make_grpo_parser()
    .parse_args_and_config(["--config", str(path), "--use_cpu", "true"])[0]
    .prompt_format
    == "spatialcore"
)


def test_every_spatialcore_recipe_is_found():
    names = {path.name for path in SPATIALCORE_GRPO_RECIPES}
    assert {"spatialcore_8b.yaml", "spatialcore_4b.yaml", "smoke.yaml", "no_confidence.yaml"} <= names
    assert len([path for path in SPATIALCORE_GRPO_RECIPES if "ablations" in path.parts]) == 5


@pytest.mark.parametrize(
    "recipe",
    SPATIALCORE_GRPO_RECIPES,
    ids=[str(path.relative_to(REPOSITORY_ROOT)) for path in SPATIALCORE_GRPO_RECIPES],
)
def test_spatialcore_recipes_optimise_the_papers_objective(recipe):
    """Eq. 2 advantages and Eq. 11's objective, not TRL's defaults (`dapo`, no KL)."""
    _, args, _ = make_grpo_parser().parse_args_and_config(["--config", str(recipe), "--use_cpu", "true"])
    # (1/G) sum_i of each trajectory's clipped term: every completion weighs the same, whatever its length
    assert args.loss_type == "grpo"
    assert args.importance_sampling_level == "token"
    assert args.scale_rewards == "group"  # A_i = (r_i - mean_G) / (std_G + eps)
    assert args.beta == 0.01  # eta, Table 4
    assert args.epsilon == args.epsilon_high == 0.2  # a symmetric clip 1 +- delta
    assert args.num_iterations == 1 and args.delta is None
    assert args.multi_objective_aggregation == "sum_then_normalize"  # r_i is one sum, then normalised
    assert args.mask_truncated_completions is True  # length stops never reinforced
    assert (
        args.top_entropy_quantile == 1.0
        and args.entropy_coef == 0.0
        and args.off_policy_mask_threshold is None
    )


GRPO_RECIPES = [path for path in RECIPES if "sft" not in path.name]


@pytest.mark.parametrize(
    "recipe", GRPO_RECIPES, ids=[str(path.relative_to(REPOSITORY_ROOT)) for path in GRPO_RECIPES]
)
def test_every_grpo_recipe_says_how_it_treats_length_stops(recipe):
    assert re.search(r"^mask_truncated_completions: (true|false)", recipe.read_text(), re.MULTILINE)
    assert re.search(r"^loss_type: \w+", recipe.read_text(), re.MULTILINE)


class OptimizerWithoutDefaults(torch.optim.Optimizer):
    """An optimizer as accelerate wraps DeepSpeed's ZeRO-3 one: parameter groups, no `defaults`."""

    def __init__(self, optimizer):  # no Optimizer.__init__: DeepSpeed's wrapper sets no defaults
        self.optimizer = optimizer
        self.param_groups = optimizer.param_groups
        self.state = optimizer.state

    @property
    def defaults(self):
        raise AttributeError("'DeepSpeedZeroOptimizer_Stage3' object has no attribute 'defaults'")

    def step(self, closure=None):
        return self.optimizer.step(closure)


@pytest.mark.parametrize("recipe", RECIPES, ids=[str(path.relative_to(REPOSITORY_ROOT)) for path in RECIPES])
def test_every_recipe_schedule_builds_under_deepspeed(recipe):
    """transformers reads `optimizer.defaults` for an absolute `min_lr`; ZeRO-3's optimizer has none."""
    from transformers import get_scheduler

    parser = make_sft_parser() if "sft" in recipe.name else make_grpo_parser()
    _, args, _ = parser.parse_args_and_config(["--config", str(recipe), "--use_cpu", "true"])
    optimizer = torch.optim.AdamW([torch.nn.Parameter(torch.zeros(1))], lr=args.learning_rate)
    get_scheduler(
        args.lr_scheduler_type,
        OptimizerWithoutDefaults(optimizer),
        num_warmup_steps=5,
        num_training_steps=100,
        scheduler_specific_kwargs=args.lr_scheduler_kwargs,
    )


@pytest.mark.slow
def test_readme_smoke_flow_trains_a_real_update_and_evaluates_it(tmp_path, monkeypatch):
    """tiny-model (fitted to the SpatialCORE format) -> smoke GRPO through the `spatial-train` console script ->
    spatial-eval with the adapter.

    A random tiny model writes noise, every rollout of a group gets the same reward and the saved LoRA
    is all zeros (spatial-eval then refuses it); the fitted one writes boxes and letters that differ.
    """
    from training.eval.cli import main as spatial_eval
    from training.testing import build_tiny_model, teach_spatialcore_format, write_tiny_training_tables

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    model = teach_spatialcore_format(build_tiny_model(tmp_path / "tiny-qwen3-vl"))
    data = write_tiny_training_tables(tmp_path / "data", rows=8)
    output = tmp_path / "smoke"
    command = [
        str(Path(sys.executable).with_name("spatial-train")),
        "grpo",
        "--config",
        SMOKE,
        "--model_name_or_path",
        str(model),
        "--data_root",
        str(data),
        "--output_dir",
        str(output),
    ]
    result = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    history = json.loads((output / "checkpoint-2" / "trainer_state.json").read_text())["log_history"]
    assert max(entry["grad_norm"] for entry in history if "grad_norm" in entry) > 0
    assert max(entry["reward_std"] for entry in history if "reward_std" in entry) > 0
    weights = load_file(output / "adapter_model.safetensors")
    assert any(float(tensor.abs().max()) > 0 for name, tensor in weights.items() if "lora_B" in name)
    omnispatial = tmp_path / "omnispatial"
    (omnispatial / "Spatial_Interaction").mkdir(parents=True)
    from PIL import Image

    records = []
    for number in range(2):
        Image.new("RGB", (64, 48), (200, 30, 30)).save(omnispatial / "Spatial_Interaction" / f"{number}.png")
        records.append(
            {
                "id": f"{number}_0",
                "task_type": "Spatial_Interaction",
                "sub_task_type": "Localization",
                "question": "Is the red chair left of the blue lamp?",
                "options": ["left", "right", "in front", "behind"],
                "answer": number,
            }
        )
    (omnispatial / "data.json").write_text(json.dumps(records))
    status = spatial_eval(
        [
            "--model",
            str(model),
            "--adapter",
            str(output),
            "--benchmarks",
            "omnispatial",
            "--omnispatial-root",
            str(omnispatial),
            "--max-new-tokens",
            "128",
            "--output",
            str(tmp_path / "eval"),
        ]
    )
    assert status == 0
