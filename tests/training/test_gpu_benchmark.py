"""The GPU check (`benchmarks/gpu/`): its pure parts, each part's CPU dry run in this process, and the whole script
where only torch and transformers are importable."""

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


RUN_SCRIPT_PARTS = re.findall(r"^part (\w+) \d+ (.+)$", (BENCH_DIR / "run.sh").read_text(), re.MULTILINE)
"""(name, arguments) of each part `run.sh` runs, as the script lists them."""


@pytest.fixture(scope="module")
def dry_run_results(gpu_bench, tmp_path_factory) -> Path:
    """A folder with the JSON of every part of `run.sh --dry-run`, each run here through `gpu_bench.main` with the
    script's arguments (the script itself runs on a bare machine below)."""
    folder = tmp_path_factory.mktemp("dry_run")
    for name, arguments in RUN_SCRIPT_PARTS:
        status = gpu_bench.main([*arguments.split(), "--dry-run", "--json", str(folder / f"{name}.json")])
        assert status == 0, (name, (folder / f"{name}.json").read_text())
    return folder


def test_run_script_runs_six_parts():
    assert [name for name, _ in RUN_SCRIPT_PARTS] == [
        "step_on",
        "step_off",
        "grounding",
        "grpo_on",
        "grpo_off",
        "eval",
    ]


def test_every_part_dry_run_succeeds_and_the_table_has_every_row(gpu_bench, dry_run_results, capsys):
    """Each part in its CPU dry run (tiny models) reports ok, and the table of the six results has every figure."""
    for part, _ in RUN_SCRIPT_PARTS:
        summary = json.loads((dry_run_results / f"{part}.json").read_text())
        assert summary["status"] == "ok", (part, summary)
    paths = [str(dry_run_results / f"{part}.json") for part, _ in RUN_SCRIPT_PARTS]
    assert gpu_bench.main(["table", *paths]) == 0
    _assert_table_rows(
        capsys.readouterr().out,
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
    )


def _assert_table_rows(table: str, *rows: str) -> None:
    """``gpu_bench table``'s output has its header and a line matching each of ``rows``."""
    assert table.splitlines()[0].split(" | ")[0].strip() == "part"
    for row in rows:
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


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_run_script_on_a_bare_machine_runs_the_step_and_says_what_the_rest_needs(tmp_path):
    """`run.sh --dry-run` where only torch and transformers are importable (no TRL, peft, polars, pillow): the GRPO
    step parts (and the preflight's estimate beside them) run, the other parts say what they need instead of
    failing on an import, and the script prints one table."""
    site = _bare_site(tmp_path / "site")
    assert not (site / "trl").exists() and not (site / "peft").exists() and not (site / "PIL").exists()
    bare_path = f"{site}:{REPOSITORY_ROOT}"
    probe = subprocess.run(
        [
            sys.executable,
            "-S",
            "-c",
            "import importlib.util as u; print([m for m in ('trl', 'peft', 'polars', 'PIL', 'scipy') if u.find_spec(m)])",
        ],
        env=dict(os.environ, PYTHONPATH=bare_path),
        capture_output=True,
        text=True,
        check=True,
    )
    assert probe.stdout.strip() == "[]"
    bare_python = tmp_path / "bare-python"  # the interpreter without its site-packages
    bare_python.write_text(f'#!/bin/sh\nexec {sys.executable} -S "$@"\n')
    bare_python.chmod(0o755)
    results = tmp_path / "results"
    run = subprocess.run(
        ["bash", str(BENCH_DIR / "run.sh"), "--dry-run", str(results)],
        cwd=tmp_path,
        env=dict(os.environ, PYTHON=str(bare_python), PYTHONPATH=bare_path),
        capture_output=True,
        text=True,
        timeout=880,
        check=False,
    )
    assert run.returncode == 0, run.stderr[-3000:]

    def summary(part: str) -> dict:
        return json.loads((results / f"{part}.json").read_text())

    for part in ("step_on", "step_off"):
        assert summary(part)["status"] == "ok", (part, (results / f"{part}.log").read_text()[-3000:])
    step = summary("step_on")
    assert step["lora_parameters"] > 0
    assert step["mean_box_entropy"] > 0  # entropies at the coordinate digits of the forced boxes
    assert step["estimate"]["total_gib"] > 0
    # the grounding part says why it cannot run here
    assert summary("grounding")["status"] == "skipped" and "needs PIL" in summary("grounding")["reason"]
    # the GRPO and eval parts say what they need (TRL, dataframely, ...) instead of failing on an import
    for part in ("grpo_on", "grpo_off", "eval"):
        result = summary(part)
        assert result["status"] == "skipped" and "needs" in result["reason"] and "trl" in result["reason"], (
            part,
            result,
        )
    _assert_table_rows(
        run.stdout,
        r"GRPO step, confidence on .*\| step time +\| [0-9.]+ s",
        r"GRPO step, confidence on .*\| preflight estimate +\| [0-9.]+ GiB",
        r"step: confidence on / off .*\| step time ratio +\| [0-9.]+",
        r"Grounding DINO \(Swin-T\) .*\| skipped .*\| needs PIL",
        r"GRPO 3 steps, confidence on .*\| skipped .*\| needs trl",
        r"spatial-eval \(vLLM\) .*\| skipped .*\| needs trl",
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
