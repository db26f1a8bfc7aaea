"""`spatial-train preflight`: the shapes against transformers, each violation on the real models' shapes.

The architecture facts are checked against a model built by transformers on the meta device (no
weights, no download); the budget's arithmetic by hand on its parts; every shipped GPU recipe must pass
on 8 x 80 GB with realistic image sizes, and one broken variant per check must fail with one sentence.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch

from training.architectures import (
    PUBLISHED_CONFIGS,
    ImageRule,
    UnknownArchitectureError,
    image_rule_from_preprocessor,
    published_shape,
)
from training.preflight import (
    GIB,
    GPU_MEMORY_GIB,
    RUNTIME_RESERVE_GIB,
    VLLM_RUNTIME_GIB,
    Machine,
    PromptScan,
    grpo_config_problem,
    grpo_config_rules_problem,
    main,
    run_preflight,
    scan_prompts,
    trl_config_problem,
    vllm_engine,
)
from training.recipe_file import RecipeFileError, read_recipe, recipe_fields
from training.testing import write_tiny_training_tables

REPOSITORY_ROOT = Path(__file__).resolve().parents[2]
RECIPES_DIR = REPOSITORY_ROOT / "training" / "recipes"
GPU_RECIPES = sorted(
    path
    for path in RECIPES_DIR.rglob("*.yaml")
    if "accelerate" not in path.parts and not path.name.startswith("smoke")
)
EIGHT_H100 = Machine.named("h100-80gb", gpus=8)


def _meta_model(name: str):
    from transformers import AutoModelForImageTextToText, Qwen2_5_VLConfig, Qwen3VLConfig

    facts = PUBLISHED_CONFIGS[name]
    text = dict(facts["text_config"], tie_word_embeddings=facts["tie_word_embeddings"])
    config_class = Qwen3VLConfig if facts["model_type"] == "qwen3_vl" else Qwen2_5_VLConfig
    if facts["model_type"] == "qwen3_vl":
        text["rope_parameters"] = {
            "rope_type": "default",
            "rope_theta": 5e6,
            "mrope_section": [24, 20, 20],
            "mrope_interleaved": True,
        }
    config = config_class(
        text_config=text,
        vision_config=facts["vision_config"],
        tie_word_embeddings=facts["tie_word_embeddings"],
    )
    with torch.device("meta"):
        return AutoModelForImageTextToText.from_config(config)


@pytest.mark.parametrize("name", sorted(PUBLISHED_CONFIGS))
def test_parameter_and_lora_counts_equal_the_transformers_model(name):
    model = _meta_model(name)
    shape = published_shape(name)
    assert shape.parameter_count() == sum(parameter.numel() for parameter in model.parameters())
    vision = sum(parameter.numel() for key, parameter in model.named_parameters() if ".visual." in f".{key}")
    assert shape.vision_parameters() == vision
    linear = [
        (key, module)
        for key, module in model.named_modules()
        if isinstance(module, torch.nn.Linear) and not key.endswith("lm_head")
    ]
    lora = sum(
        (4 if ".visual." in f".{key}." else 32) * (module.in_features + module.out_features)
        for key, module in linear
    )
    assert shape.lora_parameters(32, 4) == lora


def test_published_totals_and_kv_cache():
    # The model cards' sizes: 8.77 B, 4.44 B, 8.29 B, 3.75 B.
    sizes = {name: round(published_shape(name).parameter_count() / 1e9, 2) for name in PUBLISHED_CONFIGS}
    assert sizes == {
        "Qwen/Qwen3-VL-8B-Thinking": 8.77,
        "Qwen/Qwen3-VL-4B-Thinking": 4.44,
        "Qwen/Qwen2.5-VL-7B-Instruct": 8.29,
        "Qwen/Qwen2.5-VL-3B-Instruct": 3.75,
    }
    eight_b = published_shape("Qwen/Qwen3-VL-8B-Thinking")
    assert eight_b.kv_cache_bytes_per_token() == 36 * 8 * 128 * 2 * 2  # 144 KiB
    assert eight_b.kv_cache_bytes_per_token() * 262144 / GIB == 36.0
    assert eight_b.kv_cache_bytes_per_token(tensor_parallel_size=2) == 36 * 4 * 128 * 2 * 2
    seven_b = published_shape("Qwen/Qwen2.5-VL-7B-Instruct")
    assert seven_b.valid_tensor_parallel_sizes(8) == [1, 2, 4]  # 28 heads, 4 KV heads, 16 vision heads
    # more ranks than KV heads: each rank keeps one (replicated)
    assert seven_b.kv_cache_bytes_per_token(tensor_parallel_size=4) == seven_b.kv_cache_bytes_per_token(8)


def test_recipe_keys_are_the_dataclass_fields():
    import dataclasses

    from trl import GRPOConfig, SFTConfig

    from training.config import SpatialGRPOArguments
    from training.models import SpatialModelConfig
    from training.sft import SpatialSFTArguments

    for kind, classes in (
        ("grpo", (SpatialGRPOArguments, GRPOConfig, SpatialModelConfig)),
        ("sft", (SpatialSFTArguments, SFTConfig, SpatialModelConfig)),
    ):
        real = {item.name: item for cls in classes for item in dataclasses.fields(cls)}
        fields = recipe_fields(kind)
        assert set(fields) == set(real)
        for key in (
            "vllm_gpu_memory_utilization",
            "beta",
            "vllm_importance_sampling_mode",
            "lora_r",
            "use_peft",
        ):
            if key in real:
                assert fields[key] == real[key].default, key


def test_a_mistyped_key_is_named_with_a_suggestion():
    with pytest.raises(
        RecipeFileError, match=r"'lerning_rate' on the command line; did you mean --learning_rate"
    ):
        read_recipe(RECIPES_DIR / "smoke.yaml", ["--lerning_rate", "1e-3"])


@pytest.fixture(scope="module")
def realistic_tables(tmp_path_factory):
    """Tiny tables with the image sizes of the real sources (OmniSpatial-like, Visual Genome, ScanNet)."""
    root = tmp_path_factory.mktemp("tables")
    return {
        "spatialcore_train": write_tiny_training_tables(root / "omnispatial", rows=4, image_size=(1280, 960)),
        "stvqa": write_tiny_training_tables(root / "vg", rows=4, image_size=(800, 600)),
        "dge_tasks": write_tiny_training_tables(root / "scannet", rows=4, image_size=(1296, 968)),
    }


def _report(recipe_path, tables, *overrides, machine=EIGHT_H100, **kwargs):
    recipe = read_recipe(recipe_path, list(overrides))
    return run_preflight(recipe, machine, data_root=str(tables[recipe["dataset_table"]]), **kwargs)


@pytest.mark.parametrize("recipe", GPU_RECIPES, ids=[path.name for path in GPU_RECIPES])
def test_every_shipped_gpu_recipe_passes_on_eight_h100(recipe, realistic_tables):
    tables = {**realistic_tables, "sft_cold_start": realistic_tables["spatialcore_train"]}
    report = _report(recipe, tables, **({"prompt_tokens": 1400} if "sft" in recipe.name else {}))
    assert report.passed, report.format()
    assert report.total_gib < 80


def test_the_report_resolves_auto_from_the_data(realistic_tables):
    report = _report(RECIPES_DIR / "spatialcore_8b.yaml", realistic_tables)
    scan = report.scan
    # a 1280x960 image is 40 x 30 merged patches of 32 px
    assert scan.image_tokens == 1200 and scan.images == 1 and not scan.exact
    assert report.needed_context == scan.longest_prompt + 3072 == report.engine_context
    text = report.format()
    assert "144 KiB per token" in text and "verdict: passes" in text


# One broken variant per check, each on a real model's shape; the first violation is one sentence.
VIOLATIONS = [
    # no vllm_max_model_length: vLLM sizes the 8B's engine for 262,144 tokens (36 GiB of KV cache)
    (
        "spatialcore_8b.yaml",
        ["--vllm_max_model_length", "None"],
        r"cannot hold one sequence: 262,144 tokens need 36\.00 GiB",
    ),
    # the same for Qwen2.5-VL-7B's 128,000 tokens under ZeRO-3
    (
        "spatialthinker_7b.yaml",
        ["--vllm_max_model_length", "None"],
        r"cannot hold one sequence: 128,000 tokens",
    ),
    # 28 attention heads are not divisible by 8
    (
        "spatialthinker_7b.yaml",
        ["--vllm_tensor_parallel_size", "8"],
        r"tensor parallel size 8 does not divide the 28 attention heads",
    ),
    # a context shorter than prompt + 3,072 completion tokens
    (
        "spatialcore_4b.yaml",
        ["--vllm_max_model_length", "4096"],
        r"vllm_max_model_length 4,096 is shorter than",
    ),
    # 8 GPUs x 3 per device x 8 steps = 192 completions is not a multiple of G = 5
    (
        "spatialcore_8b.yaml",
        ["--per_device_train_batch_size", "3", "--num_generations", "5"],
        r"generation_batch_size \(192\) must be divisible by num_generations \(5\)",
    ),
    # a micro-batch of 32 sequences of 5k tokens does not fit in an 80 GB H100 (79.6 GiB)
    (
        "spatialcore_8b.yaml",
        ["--per_device_train_batch_size", "32"],
        r"estimated peak of one GPU, [0-9.]+ GiB, exceeds its 79.6 GiB",
    ),
]


@pytest.mark.parametrize("recipe, overrides, message", VIOLATIONS, ids=[v[2][:40] for v in VIOLATIONS])
def test_each_broken_variant_fails_with_one_sentence(recipe, overrides, message, realistic_tables):
    import re

    report = _report(RECIPES_DIR / recipe, realistic_tables, *overrides)
    violation = report.first_violation()
    assert violation is not None and re.search(message, violation), report.format()
    assert "\n" not in violation and violation.endswith(".")


def test_vision_lora_on_a_text_only_model(tmp_path, realistic_tables):
    import json

    folder = tmp_path / "text-only"
    folder.mkdir()
    facts = PUBLISHED_CONFIGS["Qwen/Qwen3-VL-4B-Thinking"]
    (folder / "config.json").write_text(json.dumps({"model_type": "qwen3_vl", **facts["text_config"]}))
    report = _report(
        RECIPES_DIR / "spatialcore_4b.yaml",
        realistic_tables,
        "--model_name_or_path",
        str(folder),
        prompt_tokens=1500,
    )
    assert report.first_violation().startswith("vision_lora is on, but")


def test_missing_packages_are_a_violation_when_checked(realistic_tables):
    machine = Machine.named("h100-80gb", gpus=8, check_packages=True)
    report = _report(RECIPES_DIR / "spatialthinker_7b.yaml", realistic_tables, machine=machine)
    # this machine has neither vLLM nor DeepSpeed nor flash-attn
    assert "not installed" in report.first_violation()


def test_server_mode_checks_the_server_tensor_parallel_size(realistic_tables):
    recipe = RECIPES_DIR / "spatialthinker_7b_vllm_server.yaml"
    bad = _report(
        recipe, realistic_tables, machine=Machine.named("h100-80gb", gpus=16, server_tensor_parallel_size=8)
    )
    assert "does not divide the 28 attention heads" in bad.first_violation()
    good = _report(
        recipe, realistic_tables, machine=Machine.named("h100-80gb", gpus=16, server_tensor_parallel_size=4)
    )
    assert good.passed, good.format()


def test_exact_count_with_the_tokenizer(tiny_qwen3_vl, realistic_tables):
    from training.preflight import load_tokenizer

    recipe = read_recipe(RECIPES_DIR / "smoke.yaml", ["--model_name_or_path", str(tiny_qwen3_vl)])
    shape = published_shape("Qwen/Qwen3-VL-8B-Thinking")
    tokenizer = load_tokenizer(str(tiny_qwen3_vl))
    exact = scan_prompts(recipe, shape, str(realistic_tables["spatialcore_train"]), tokenizer)
    bound = scan_prompts(recipe, shape, str(realistic_tables["spatialcore_train"]))
    assert exact.exact and not bound.exact
    assert exact.image_tokens == bound.image_tokens == 1200
    assert exact.text_tokens < bound.text_tokens  # the bytes bound the tokens from above
    # independent count: the processor's own input ids for the same prompt with its (tiny) image budget
    from data_contracts.images import decode_image
    from training.models import load_processor, resize_rule_of
    from training.prompts import build_messages
    from training.testing import tiny_training_frames

    processor = load_processor(tiny_qwen3_vl, "qwen3_vl")
    row = tiny_training_frames(rows=1, image_size=(1280, 960))["spatialcore_train"].to_dicts()[0]
    messages = build_messages("spatialcore", row, "qwen3_vl")
    messages[1] = {
        "role": "user",
        "content": [{"type": "image"}, {"type": "text", "text": messages[1]["content"]}],
    }
    text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    ids = processor(text=[text], images=[decode_image(row["image"])], return_tensors="pt")["input_ids"]
    rule = resize_rule_of(processor)
    image_tokens = ImageRule(rule.factor, rule.min_pixels, rule.max_pixels).tokens(1280, 960)
    assert exact.text_tokens + image_tokens == ids.shape[1]


def test_command_prints_the_table_and_exits_one_on_a_violation(realistic_tables, capsys):
    recipe = str(RECIPES_DIR / "spatialthinker_7b.yaml")
    data = str(realistic_tables["stvqa"])
    assert main(["--config", recipe, "--data_root", data]) == 0
    out = capsys.readouterr().out
    assert "DeepSpeed ZeRO-3" in out and "verdict: passes" in out
    assert "8 GPUs x 79.6 GiB (H100 80GB, --gpu h100-80gb)" in out
    assert main(["--config", recipe, "--data_root", data, "--vllm_tensor_parallel_size", "8"]) == 1
    assert "does not divide the 28 attention heads" in capsys.readouterr().err
    assert main(["--config", recipe, "--data_root", str(Path(data) / "missing")]) == 2


def test_server_args_for_the_sbatch(realistic_tables, capsys):
    recipe = str(RECIPES_DIR / "spatialthinker_7b_vllm_server.yaml")
    status = main(
        [
            "--config",
            recipe,
            "--data_root",
            str(realistic_tables["stvqa"]),
            "--gpus",
            "16",
            "--server-gpus",
            "8",
            "--server-args",
        ]
    )
    assert status == 0
    flags = capsys.readouterr().out.split()
    assert flags[:4] == ["--tensor_parallel_size", "4", "--data_parallel_size", "2"]
    assert flags[4] == "--max_model_len" and int(flags[5]) > 2048


def test_spatial_train_answers_without_importing_the_trainer(tmp_path):
    """`--help` (of grpo too), a mistyped key, a missing model folder and a data root without the table: answered
    before torch/transformers/TRL load, errors in one line."""
    code = (
        "import sys; from training.cli import main; status = main(sys.argv[1:]); "
        "heavy = [m for m in ('torch', 'transformers', 'trl', 'peft') if m in sys.modules]; "
        "print('HEAVY', heavy); raise SystemExit(status)"
    )
    smoke = str(RECIPES_DIR / "smoke.yaml")
    model_dir = tmp_path / "model"
    model_dir.mkdir()
    (model_dir / "config.json").write_text("{}")
    cases = [
        (["--help"], 0, "usage: spatial-train"),
        (["grpo", "--help"], 0, "--num_generations (default 8)"),
        (["sft", "--config", smoke, "--help"], 0, "usage: spatial-train sft"),
        (["grpo", "--config", smoke, "--lerning_rate", "1"], 2, "did you mean --learning_rate"),
        (
            ["grpo", "--config", smoke, "--model_name_or_path", str(tmp_path / "outputs" / "nothere")],
            2,
            f"model folder {tmp_path / 'outputs' / 'nothere'} does not exist",
        ),
        (
            ["grpo", "--config", smoke, "--model_name_or_path", str(model_dir), "--data_root", str(tmp_path)],
            2,
            "table 'spatialcore_train' not found",
        ),
    ]
    for arguments, status, text in cases:
        result = subprocess.run(
            [sys.executable, "-c", code, *arguments],
            capture_output=True,
            text=True,
            cwd=REPOSITORY_ROOT,
            check=False,
        )
        assert result.returncode == status, result.stderr
        assert text in result.stdout + result.stderr
        assert "HEAVY []" in result.stdout
        assert len(result.stderr.strip().splitlines()) <= 1


def test_plan_without_data():
    recipe = read_recipe(RECIPES_DIR / "spatialcore_8b.yaml", [])
    report = run_preflight(recipe, EIGHT_H100, prompt_tokens=2000)
    assert report.needed_context == 5072 and report.passed, report.format()


def test_scan_reads_image_sizes_from_the_bytes_of_multi_frame_tables(realistic_tables):
    recipe = read_recipe(RECIPES_DIR / "dge_7b.yaml", [])
    scan = scan_prompts(
        recipe, published_shape("Qwen/Qwen2.5-VL-7B-Instruct"), str(realistic_tables["dge_tasks"])
    )
    # 1296x968 -> 1288x980 (multiples of 28) -> 46 x 35 = 1,610 tokens per frame, 2 frames
    assert (scan.images, scan.image_tokens) == (2, 2 * 1610)
    assert isinstance(scan, PromptScan)


# GPUs by name, the engine awake beside the policy under sleep mode, vLLM's profiling run, TRL's config rules.


def test_a_named_gpu_has_the_memory_cuda_reports_and_the_report_says_which(realistic_tables, capsys):
    recipe, data = str(RECIPES_DIR / "spatialthinker_7b.yaml"), str(realistic_tables["stvqa"])
    assert main(["--config", recipe, "--data_root", data, "--gpu", "a100-40gb", "--gpus", "16"]) in (0, 1)
    assert "16 GPUs x 39.5 GiB (A100 40GB, --gpu a100-40gb)" in capsys.readouterr().out
    assert main(["--config", recipe, "--data_root", data, "--gpu-memory-gib", "80"]) == 0
    assert "8 GPUs x 80 GiB (--gpu-memory-gib 80)" in capsys.readouterr().out
    assert main(["--config", recipe, "--data_root", data, "--gpu", "h200", "--gpu-memory-gib", "80"]) == 2
    assert "not both" in capsys.readouterr().err
    # what CUDA reports is a little below the marketed size read as GiB (an "80 GB" H100: 85,520,809,984 bytes)
    marketed = {"h100-80gb": 80, "h200": 141, "a100-80gb": 80, "a100-40gb": 40, "l40s": 48}
    assert set(GPU_MEMORY_GIB) == set(marketed)
    for name, gib in GPU_MEMORY_GIB.items():
        assert 0.9 * marketed[name] < gib < marketed[name], name


SLEEP_MODE_CASES = [
    # 8 x H100, utilization 0.8: 63.68 GiB of engine beside 16.33 of policy, 1.33 of LoRA state, 2 of runtime
    (Machine.named("h100-80gb", gpus=8), "0.8"),
    # 40 GiB GPUs, utilization 0.6: 24 + 16.33 + 1.33 + 2 = 43.66 GiB
    (Machine(gpus=8, gpu_memory_gib=40.0, gpu_label="--gpu-memory-gib 40"), "0.6"),
]


@pytest.mark.parametrize("machine, utilization", SLEEP_MODE_CASES, ids=["8xH100 0.8", "40GiB 0.6"])
def test_sleep_mode_budgets_the_engine_awake_beside_the_policy(machine, utilization, realistic_tables):
    """Sleep mode frees the engine between generations, not during them: while it generates, its whole share sits
    beside the policy's weights, the LoRA state and the runtime (by hand from the model's parameter counts)."""
    report = _report(
        RECIPES_DIR / "spatialcore_8b.yaml",
        realistic_tables,
        "--vllm_enable_sleep_mode",
        "true",
        "--vllm_gpu_memory_utilization",
        utilization,
        machine=machine,
        prompt_tokens=1400,
    )
    shape = published_shape("Qwen/Qwen3-VL-8B-Thinking")
    policy = shape.parameter_count() * 2 / GIB
    lora_state = shape.lora_parameters(32, 4) * 16 / GIB
    awake = float(utilization) * machine.gpu_memory_gib + policy + lora_state + RUNTIME_RESERVE_GIB
    assert report.generation_gib == pytest.approx(awake)
    assert report.total_gib == pytest.approx(awake) and awake > machine.gpu_memory_gib
    assert (
        "while generating" in report.first_violation()
        and "vllm_enable_sleep_mode" in report.first_violation()
    )
    # asleep, the engine is no part of the training phase
    engine = next(line for line in report.lines if line.label.startswith("vLLM engine"))
    assert engine.gib == 0.0


def test_sleep_mode_passes_where_the_awake_engine_fits(realistic_tables):
    report = _report(
        RECIPES_DIR / "spatialcore_8b.yaml", realistic_tables, "--vllm_enable_sleep_mode", "true"
    )
    assert report.passed, report.format()
    assert report.generation_gib < report.training_gib <= report.total_gib


def test_a_preprocessor_config_without_a_pixel_budget_is_refused_by_name():
    """`max_pixels` (or `size.longest_edge`) bounds every image: without it the preflight says so instead of
    failing on `int(None)`; a missing minimum falls back to one merged patch."""
    assert image_rule_from_preprocessor({"size": {"longest_edge": 4096}, "patch_size": 16}) == ImageRule(
        32, 1024, 4096
    )
    with pytest.raises(UnknownArchitectureError, match="max_pixels or size.longest_edge"):
        image_rule_from_preprocessor({"size": {"shortest_edge": 3136}, "patch_size": 14})


def test_the_engine_budgets_its_profiling_run_on_a_largest_image():
    """vLLM profiles a largest image (16,384 tokens for Qwen3-VL) before it sizes the KV cache; the vision encoder's
    working set on its 65,536 patches, written out from the published config, is what the engine keeps aside."""
    facts = PUBLISHED_CONFIGS["Qwen/Qwen3-VL-8B-Thinking"]
    vision, text, pre = facts["vision_config"], facts["text_config"], facts["preprocessor"]
    tokens = pre["max_pixels"] // (pre["patch_size"] * pre["merge_size"]) ** 2
    patches = tokens * pre["merge_size"] ** 2
    assert (tokens, patches) == (16384, 65536)
    working_set = patches * (4 * vision["hidden_size"] + 2 * vision["intermediate_size"]) * 2
    embeddings = tokens * text["hidden_size"] * 2 * (1 + len(vision["deepstack_visual_indexes"]))
    shape = published_shape("Qwen/Qwen3-VL-8B-Thinking")
    share = 0.3 * GPU_MEMORY_GIB["h100-80gb"]
    engine = vllm_engine(shape, share, 1, max_sequences=64)
    assert engine["profile_gib"] == pytest.approx((working_set + embeddings) / GIB)
    weights = shape.parameter_count() * 2 / GIB
    assert engine["kv_gib"] == pytest.approx(
        share - weights - (working_set + embeddings) / GIB - VLLM_RUNTIME_GIB
    )


def test_an_engine_too_small_for_its_weights_is_told_to_grow_not_to_set_the_context(realistic_tables):
    """With vllm_max_model_length: auto already, an engine whose share does not hold its weights and overhead is told
    the utilization it needs; one whose KV cache is short of the context too."""
    report = _report(
        RECIPES_DIR / "spatialcore_8b.yaml", realistic_tables, "--vllm_gpu_memory_utilization", "0.25"
    )
    violation = report.first_violation()
    assert "is smaller than its 16.33 GiB of weights" in violation, violation
    assert "raise vllm_gpu_memory_utilization to at least 0.26" in violation
    assert "vllm_max_model_length" not in violation
    long = _report(
        RECIPES_DIR / "spatialcore_8b.yaml",
        realistic_tables,
        "--vllm_gpu_memory_utilization",
        "0.27",
        "--max_completion_length",
        "16000",
    )
    violation = long.first_violation()
    assert (
        "cannot hold one sequence" in violation
        and "raise vllm_gpu_memory_utilization to at least" in violation
    )
    assert "set vllm_max_model_length" not in violation


BATCH_CASES = [
    # (overrides of spatialcore_8b: 8 per device, 8 accumulation steps, G 4; GPUs)
    (["--generation_batch_size", "100"], 1),  # 100 is no multiple of the global batch 8
    (["--generation_batch_size", "128"], 1),  # 16 steps per generation
    (["--generation_batch_size", "128", "--steps_per_generation", "2"], 8),  # both set
    (["--per_device_train_batch_size", "3", "--num_generations", "5"], 8),  # 192 completions, G 5
    (["--num_generations", "1", "--per_device_train_batch_size", "1"], 1),  # G < 2
    (["--eval_strategy", "steps", "--per_device_eval_batch_size", "3"], 1),  # eval batch 3, G 4
    (["--eval_strategy", "steps", "--per_device_eval_batch_size", "3"], 4),  # eval batch 12, G 4
    (["--vllm_importance_sampling_clip_min", "3.0"], 8),  # clip min >= max 3.0
    (["--vllm_importance_sampling_clip_max", "None"], 8),  # truncation without a clip
    (["--auto_find_batch_size", "true"], 8),
    (["--log_completions_hub_repo", "me/completions"], 8),  # without log_completions
    ([], 8),
]


@pytest.mark.parametrize(
    "overrides, gpus", BATCH_CASES, ids=[" ".join(c[0]) + f" x{c[1]}" for c in BATCH_CASES]
)
def test_the_batch_rules_are_the_ones_trls_config_applies(overrides, gpus):
    """The rules used where TRL is not installed refuse exactly what constructing TRL's GRPOConfig refuses."""
    recipe = read_recipe(RECIPES_DIR / "spatialcore_8b.yaml", overrides)
    constructed = trl_config_problem(recipe, gpus)
    rules = grpo_config_rules_problem(recipe, gpus)
    assert (constructed is None) == (rules is None), (constructed, rules)
    if rules is not None:
        assert rules.split("(")[0] == constructed.split("(")[0], (constructed, rules)


def test_the_batch_check_names_trls_refusal_and_the_real_steps(realistic_tables):
    one = Machine.named("h100-80gb", gpus=1, trl_config="construct")
    bad = _report(
        RECIPES_DIR / "spatialcore_8b.yaml", realistic_tables, "--generation_batch_size", "100", machine=one
    )
    assert bad.first_violation() == (
        "TRL's GRPOConfig refuses the recipe on 1 GPU(s): generation_batch_size (100) must be divisible by the global "
        "batch size (8)."
    )
    good = _report(
        RECIPES_DIR / "spatialcore_8b.yaml", realistic_tables, "--generation_batch_size", "128", machine=one
    )
    assert "generation batch 128 = 8 per GPU x 1 GPUs x 16 steps per generation" in good.format()
    by_rules = Machine.named("h100-80gb", gpus=1)
    recipe = read_recipe(RECIPES_DIR / "spatialcore_8b.yaml", ["--generation_batch_size", "100"])
    assert grpo_config_problem(recipe, 1, construct=False)[1].startswith("GRPOConfig's rules")
    report = run_preflight(recipe, by_rules, prompt_tokens=2000)
    assert "(checked by its rules, without TRL)" in report.first_violation()
