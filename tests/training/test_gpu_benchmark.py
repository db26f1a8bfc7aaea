"""The GPU check (`benchmarks/gpu/`): its pure parts here, and the whole script in its CPU dry run."""

from __future__ import annotations

import importlib.util
import json
import os
import random
import re
import subprocess
import sys
from pathlib import Path

import pytest

from training.rewards.parsing import parse_spatialcore

REPOSITORY_ROOT = Path(__file__).resolve().parents[2]
BENCH_DIR = REPOSITORY_ROOT / "benchmarks" / "gpu"


@pytest.fixture(scope="module")
def gpu_bench():
    spec = importlib.util.spec_from_file_location("gpu_bench", BENCH_DIR / "gpu_bench.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _sample(pattern_generator: random.Random, gpu_bench) -> str:
    """A completion as the regex allows it (the forms vLLM's structured outputs can emit)."""

    def box():
        x1, y1 = (pattern_generator.randint(100, 499) for _ in range(2))
        x2, y2 = (pattern_generator.randint(500, 999) for _ in range(2))
        label = pattern_generator.choice(gpu_bench.LABELS)
        return f'{{"bbox_2d": [{x1}, {y1}, {x2}, {y2}], "label": "{label}"}}\n'

    reasoning = "".join(pattern_generator.choice("abc ") for _ in range(pattern_generator.randint(16, 64)))
    return box() + box() + reasoning + "</think>" + pattern_generator.choice("ABCD")


def test_forced_completions_carry_two_scored_boxes(gpu_bench):
    generator = random.Random(0)
    for _ in range(50):
        text = _sample(generator, gpu_bench)
        assert re.fullmatch(gpu_bench.COMPLETION_REGEX, text)
        parse = parse_spatialcore(text)
        assert len(parse.grounding_boxes) == 2 and parse.answer_letter in "ABCD"
    assert not re.fullmatch(
        gpu_bench.COMPLETION_REGEX, '{"bbox_2d": [500, 1, 2, 3], "label": "x"}\n</think>A'
    )


def test_table_reports_the_ratios_and_failures(gpu_bench):
    results = {
        "grounding": {
            "status": "ok",
            "device": "cuda",
            "dtype": "float16",
            "images": 64,
            "images_per_second": {"1": 10.0, "16": 40.0},
            "speedup": 4.0,
        },
        "grpo_on": {
            "status": "ok",
            "device": "cuda",
            "generation": "vLLM colocate",
            "entropy_source": "logprob_pass",
            "step_time_s": 10.5,
            "peak_memory_gib": 60.0,
            "boxes_per_completion": 2.0,
        },
        "grpo_off": {
            "status": "ok",
            "device": "cuda",
            "generation": "vLLM colocate",
            "entropy_source": "none",
            "step_time_s": 10.0,
            "peak_memory_gib": 60.0,
            "boxes_per_completion": 2.0,
        },
        "eval": {"status": "failed", "reason": "RuntimeError: no GPU"},
    }
    table = gpu_bench.format_table(results)
    assert re.search(r"batched / one at a time \| 4\.00x", table)
    assert re.search(r"step time ratio +\| 1\.050", table)
    assert re.search(r"peak memory ratio +\| 1\.000", table)
    assert re.search(r"spatial-eval \(vLLM\) .*\| failed .*\| RuntimeError: no GPU", table)


def test_4b_folder_has_the_real_shapes(gpu_bench, tmp_path):
    from transformers import AutoConfig, AutoTokenizer

    folder = gpu_bench.write_qwen3_vl_4b_folder(tmp_path / "model")
    config = AutoConfig.from_pretrained(folder)
    assert (config.text_config.hidden_size, config.text_config.num_hidden_layers) == (2560, 36)
    assert config.text_config.vocab_size == 151936 and config.vision_config.depth == 24
    tokenizer = AutoTokenizer.from_pretrained(folder)
    assert gpu_bench.QWEN_BPE_SIZE < len(tokenizer) <= config.text_config.vocab_size
    assert tokenizer.convert_tokens_to_ids("<|image_pad|>") == config.image_token_id
    assert tokenizer.decode([151000]) == " tok151000"  # any id a random policy emits decodes


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_run_script_dry_run_prints_one_table(tmp_path):
    result = subprocess.run(
        ["bash", str(BENCH_DIR / "run.sh"), "--dry-run", str(tmp_path)],
        cwd=tmp_path,
        env=dict(os.environ, PYTHON=sys.executable),
        capture_output=True,
        text=True,
        timeout=880,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    for part in ("step_on", "step_off", "grounding", "grpo_on", "grpo_off", "eval"):
        summary = json.loads((tmp_path / f"{part}.json").read_text())
        assert summary["status"] == "ok", (part, summary, (tmp_path / f"{part}.log").read_text()[-3000:])
    table = result.stdout
    assert table.splitlines()[0].split(" | ")[0].strip() == "part"
    for row in (
        r"GRPO step, confidence on .*\| step time +\| [0-9.]+ s",
        r"GRPO step, confidence on .*\| preflight estimate +\| [0-9.]+ GiB",
        r"GRPO step, confidence on .*\| mean box entropy +\| [0-9.]+ nats",
        r"step: confidence on / off .*\| step time ratio +\| [0-9.]+",
        r"Grounding DINO \(Swin-T\) .*\| batched / one at a time \| [0-9.]+x",
        r"GRPO 3 steps, confidence on .*entropies: generation .*\| median step time +\| [0-9.]+ s",
        r"GRPO 3 steps, confidence off .*entropies: none .*\| median step time +\| [0-9.]+ s",
        r"confidence on / off .*\| step time ratio +\| [0-9.]+",
        r"confidence on / off .*\| peak memory ratio +\| [0-9.]+",
        r"spatial-eval \(vLLM\) .*\| 4 items +\| [0-9.]+ s",
    ):
        assert re.search(row, table), row


def _bare_site(folder: Path) -> Path:
    """A folder holding only torch, transformers and their own dependencies (what a bare GPU machine has)."""
    import importlib.metadata as metadata

    seen, todo = {}, ["torch", "transformers"]
    while todo:
        name = re.split(r"[<>=!~; \[(]", todo.pop())[0].strip().lower().replace("_", "-")
        if not name or name in seen:
            continue
        try:
            seen[name] = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue
        todo += [requirement for requirement in seen[name].requires or [] if "extra ==" not in requirement]
    folder.mkdir(parents=True, exist_ok=True)
    for distribution in seen.values():
        tops = (distribution.read_text("top_level.txt") or "").split() or {
            file.parts[0].removesuffix(".py")
            for file in distribution.files or []
            if not file.parts[0].endswith((".dist-info", ".data"))
        }
        root = Path(distribution.locate_file(""))
        for top in tops:
            for candidate in (root / top, root / f"{top}.py"):
                if candidate.exists() and not (folder / candidate.name).exists():
                    (folder / candidate.name).symlink_to(candidate)
        info = Path(str(distribution._path))
        if not (folder / info.name).exists():
            (folder / info.name).symlink_to(info)
    return folder


def test_step_part_runs_with_only_torch_and_transformers(tmp_path):
    """The GRPO step (and the preflight's estimate beside it) on a machine without TRL, peft, polars, pillow."""
    site = _bare_site(tmp_path / "site")
    assert not (site / "trl").exists() and not (site / "peft").exists() and not (site / "PIL").exists()
    probe = subprocess.run(
        [
            sys.executable,
            "-S",
            "-c",
            "import importlib.util as u; print([m for m in ('trl', 'peft', 'polars', 'PIL', 'scipy') if u.find_spec(m)])",
        ],
        env=dict(os.environ, PYTHONPATH=f"{site}:{REPOSITORY_ROOT}"),
        capture_output=True,
        text=True,
        check=True,
    )
    assert probe.stdout.strip() == "[]"
    output = tmp_path / "step_on.json"
    result = subprocess.run(
        [
            sys.executable,
            "-S",
            str(BENCH_DIR / "gpu_bench.py"),
            "step",
            "--confidence",
            "on",
            "--dry-run",
            "--json",
            str(output),
        ],
        env=dict(os.environ, PYTHONPATH=f"{site}:{REPOSITORY_ROOT}", HF_HUB_OFFLINE="1"),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    summary = json.loads(output.read_text())
    assert summary["status"] == "ok" and summary["lora_parameters"] > 0
    assert summary["mean_box_entropy"] > 0  # entropies at the coordinate digits of the forced boxes
    assert summary["estimate"]["total_gib"] > 0
    # the same part says why it cannot run the GPU step without a GPU
    skipped = subprocess.run(
        [
            sys.executable,
            "-S",
            str(BENCH_DIR / "gpu_bench.py"),
            "grounding",
            "--json",
            str(tmp_path / "g.json"),
        ],
        env=dict(os.environ, PYTHONPATH=f"{site}:{REPOSITORY_ROOT}"),
        capture_output=True,
        text=True,
        check=False,
    )
    assert skipped.returncode == 0
    assert "needs PIL" in json.loads((tmp_path / "g.json").read_text())["reason"]
    # the GRPO and eval parts say what they need (TRL, dataframely, ...) instead of failing on an import
    for part in (["grpo", "--confidence", "on"], ["eval"]):
        output = tmp_path / f"{part[0]}.json"
        bare = subprocess.run(
            [sys.executable, "-S", str(BENCH_DIR / "gpu_bench.py"), *part, "--json", str(output)],
            env=dict(os.environ, PYTHONPATH=f"{site}:{REPOSITORY_ROOT}"),
            capture_output=True,
            text=True,
            check=False,
        )
        assert bare.returncode == 0, bare.stderr[-2000:]
        result = json.loads(output.read_text())
        assert result["status"] == "skipped" and "needs" in result["reason"] and "trl" in result["reason"], (
            result
        )


def test_a_part_skips_for_a_missing_project_dependency_and_fails_for_a_missing_project_module(gpu_bench):
    """An import error of a dependency (dataframely on a box with TRL) skips the part and names it; one of the
    project's own modules is a broken checkout and is raised."""
    skipped = gpu_bench._skipped_for(ModuleNotFoundError("No module named 'dataframely'", name="dataframely"))
    assert skipped == {
        "status": "skipped",
        "reason": "needs dataframely, a project dependency (not on a bare GPU machine)",
    }
    with pytest.raises(ModuleNotFoundError):
        gpu_bench._skipped_for(ModuleNotFoundError("No module named 'training.gone'", name="training.gone"))


def test_step_estimate_terms():
    """The step's estimate is the preflight's budget without an engine (its GPU runtime allowance left out)."""
    spec = importlib.util.spec_from_file_location("grpo_step", BENCH_DIR / "grpo_step.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    import tempfile

    from training.testing import build_tiny_model

    with tempfile.TemporaryDirectory() as folder:
        model = build_tiny_model(folder)
        estimate = module.preflight_estimate(Path(model), 8, 3372, 3072, 300)
    assert "vLLM engine (colocate)" not in estimate["lines"] and estimate["total_gib"] > 0
