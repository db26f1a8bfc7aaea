"""The GPU check of the trainer on a bare GPU machine: measurements on one H100/H200, printed as one table.

The machine is assumed to have Python, torch and transformers and nothing else (no network, no TRL,
peft, polars, dagster or vLLM). `run.sh` installs the few small wheels the parts import from
`benchmarks/gpu/wheelhouse/` (prepared on a connected machine by `make_wheelhouse.sh`), runs each part
in its own process and time limit, and prints the table. Parts (each a subcommand writing one JSON):

* `step`: one real 3,072-token GRPO step of a Qwen3-VL-4B-shaped policy (random weights), with
  confidence weighting (entropies in the old-policy pass, box entropies at the coordinate digits) and
  without; torch and transformers only (`grpo_step.py` says what a step is). Time per step, peak GPU
  memory, and the preflight's estimate for the same step beside it.
* `grounding`: Grounding DINO at full size (Swin-T + BERT-base, 900 queries; random weights) over
  1280x960 images resized to 800x1333, images/s one at a time vs batches of 16, through the
  `pseudo_gt_boxes` asset's detector (needs pillow and pydantic, from the wheelhouse).
* `grpo` / `eval` (only where TRL and vLLM are installed, i.e. not on a bare machine: they are skipped
  and the table says so): 3 TRL GRPO steps with vLLM colocate, and `spatial-eval` with vLLM.
* `table`: the results as one table.

`--dry-run` runs every part on the CPU with tiny models (what `tests/training/test_gpu_benchmark.py`
runs, the `step` part with only torch and transformers importable).

    bash benchmarks/gpu/run.sh                 # on the GPU machine: about 4-6 minutes
    bash benchmarks/gpu/run.sh --dry-run       # CPU, about a minute
    python benchmarks/gpu/gpu_bench.py step --confidence on --json /tmp/on.json [--dry-run]
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import math
import resource
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

REPOSITORY_ROOT = Path(__file__).resolve().parents[2]
for folder in (REPOSITORY_ROOT, Path(__file__).resolve().parent):
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))

from training.architectures import PUBLISHED_CONFIGS  # noqa: E402  (plain Python: runs on a bare machine too)

# Qwen3-VL-4B's published shapes (the preflight's table, each fact with its source), plus its rotary settings.
QWEN3_VL_4B = PUBLISHED_CONFIGS["Qwen/Qwen3-VL-4B-Thinking"]
QWEN3_VL_4B_TEXT = {
    **QWEN3_VL_4B["text_config"],
    "tie_word_embeddings": QWEN3_VL_4B["tie_word_embeddings"],
    "rope_parameters": {
        "rope_type": "default",
        "rope_theta": 5000000.0,
        "mrope_section": [24, 20, 20],
        "mrope_interleaved": True,
    },
}
QWEN3_VL_4B_VISION = QWEN3_VL_4B["vision_config"]
QWEN_BPE_SIZE = 151643
IMAGE_SIZE = (640, 480)  # 20 x 15 = 300 image tokens per prompt for Qwen3-VL
LABELS = ("red chair", "blue lamp", "wooden table")
# Two valid boxes (x2 > x1, y2 > y1 by construction), short reasoning, the letter.
BOX_REGEX = (
    r'\{"bbox_2d": \[[1-4][0-9]{2}, [1-4][0-9]{2}, [5-9][0-9]{2}, [5-9][0-9]{2}\], "label": "('
    + "|".join(LABELS)
    + r')"\}\n'
)
COMPLETION_REGEX = f"({BOX_REGEX}){{2}}[a-z ]{{16,64}}</think>[A-D]"

PART_TITLES = {
    "step_on": "GRPO step, confidence on",
    "step_off": "GRPO step, confidence off",
    "grounding": "Grounding DINO (Swin-T)",
    "grpo_on": "GRPO 3 steps, confidence on",
    "grpo_off": "GRPO 3 steps, confidence off",
    "eval": "spatial-eval (vLLM)",
}


# -- pure helpers (importable without a GPU, tested) ---------------------------------------------------


def ratio(numerator: float | None, denominator: float | None) -> float | None:
    """`numerator / denominator`, or `None` when either is missing or the denominator is 0.

    >>> ratio(3.0, 2.0), ratio(None, 2.0), ratio(1.0, 0.0)
    (1.5, None, None)
    """
    if numerator is None or denominator is None or denominator == 0:
        return None
    return numerator / denominator


def _number(value: float | None, digits: int = 2, unit: str = "") -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "-"
    return f"{value:.{digits}f}{unit}"


def format_table(results: dict[str, dict]) -> str:
    """One table of every part's figures: part | setting | figure | value.

    Args:
        results (`dict[str, dict]`): part name (`step_on`, `step_off`, `grounding`, `grpo_on`, `grpo_off`,
            `eval`) -> its JSON.

    >>> print(format_table({"eval": {"status": "ok", "items": 50, "seconds": 25.0, "backend": "vllm",
    ...                              "device": "cuda"}}))
    part                | setting    | figure   | value
    --------------------+------------+----------+-------------------
    spatial-eval (vLLM) | vllm, cuda | 50 items | 25.00 s, 2.00 items/s
    """
    rows: list[tuple[str, str, str, str]] = []
    for part in ("step_on", "step_off", "grounding", "grpo_on", "grpo_off", "eval"):
        result = results.get(part)
        if result is None:
            continue
        title = PART_TITLES[part]
        if result.get("status") != "ok":
            rows.append((title, "", result.get("status", "failed"), str(result.get("reason", ""))[:100]))
            continue
        if part.startswith("step"):
            setting = (
                f"{result['dtype']}, {result['device']}, {result['batch']} x {result['sequence']:,} tokens"
            )
            rows.append((title, setting, "step time", _number(result.get("step_time_s"), 2, " s")))
            rows.append(
                (title, setting, "peak GPU memory", _number(result.get("peak_memory_gib"), 2, " GiB"))
            )
            estimate = (result.get("estimate") or {}).get("total_gib")
            rows.append((title, setting, "preflight estimate", _number(estimate, 2, " GiB")))
            if result.get("mean_box_entropy") is not None:
                rows.append(
                    (title, setting, "mean box entropy", _number(result["mean_box_entropy"], 3, " nats"))
                )
        elif part == "grounding":
            setting = f"{result['dtype']}, {result['device']}, {result['images']} images"
            rates = result["images_per_second"]
            for batch, rate in rates.items():
                rows.append((title, setting, f"batch {batch}", f"{rate:.2f} images/s"))
            rows.append((title, setting, "batched / one at a time", _number(result.get("speedup"), 2, "x")))
        elif part.startswith("grpo"):
            setting = f"{result['generation']}, entropies: {result['entropy_source']}"
            rows.append((title, setting, "median step time", _number(result.get("step_time_s"), 2, " s")))
            rows.append(
                (title, setting, "peak GPU memory", _number(result.get("peak_memory_gib"), 2, " GiB"))
            )
            rows.append(
                (title, setting, "boxes per completion", _number(result.get("boxes_per_completion"), 2))
            )
        else:
            items, seconds = result["items"], result["seconds"]
            rows.append(
                (
                    title,
                    f"{result['backend']}, {result['device']}",
                    f"{items} items",
                    f"{seconds:.2f} s, {items / seconds:.2f} items/s",
                )
            )
    step_on, step_off = results.get("step_on") or {}, results.get("step_off") or {}
    if step_on.get("status") == step_off.get("status") == "ok":
        title = "step: confidence on / off"
        rows.append(
            (title, "", "step time ratio", _number(ratio(step_on["step_time_s"], step_off["step_time_s"]), 3))
        )
        memory = ratio(step_on.get("peak_memory_gib"), step_off.get("peak_memory_gib"))
        rows.append((title, "", "peak memory ratio", _number(memory, 3)))
    on, off = results.get("grpo_on") or {}, results.get("grpo_off") or {}
    if on.get("status") == off.get("status") == "ok":
        title = "confidence on / off"
        rows.append((title, "", "step time ratio", _number(ratio(on["step_time_s"], off["step_time_s"]), 3)))
        memory = ratio(on.get("peak_memory_gib"), off.get("peak_memory_gib"))
        rows.append((title, "", "peak memory ratio", _number(memory, 3)))
    header = ("part", "setting", "figure", "value")
    widths = [max(len(row[column]) for row in [header, *rows]) for column in range(3)]
    lines = [
        " | ".join(cell.ljust(width) for cell, width in zip(header[:3], widths, strict=True)) + " | value"
    ]
    lines.append("-+-".join("-" * width for width in widths) + "-+-" + "-" * 18)
    for row in rows:
        lines.append(
            " | ".join(cell.ljust(width) for cell, width in zip(row[:3], widths, strict=True))
            + f" | {row[3]}"
        )
    return "\n".join(lines)


def write_omnispatial(root: Path, items: int, image_size: tuple[int, int]) -> Path:
    """An OmniSpatial test folder in its release layout: `data.json` and `<task_type>/<id>.png`."""
    from PIL import Image

    folder = root / "Spatial_Interaction"
    folder.mkdir(parents=True, exist_ok=True)
    records = []
    for number in range(items):
        Image.new("RGB", image_size, ((number * 37) % 255, (number * 91) % 255, 120)).save(
            folder / f"{number}.png"
        )
        records.append(
            {
                "id": f"{number}_0",
                "task_type": "Spatial_Interaction",
                "sub_task_type": "Localization",
                "question": f"Question {number}: is the red chair left of the blue lamp?",
                "options": ["left", "right", "in front", "behind"],
                "answer": number % 4,
            }
        )
    (root / "data.json").write_text(json.dumps(records))
    return root


def write_qwen3_vl_4b_folder(folder: Path) -> Path:
    """Config, tokenizer (Qwen's vocabulary size, filler words) and processor of a Qwen3-VL-4B shape; no weights."""
    from transformers import Qwen3VLConfig

    from training.testing import build_tiny_image_processor, build_tiny_tokenizer

    folder.mkdir(parents=True, exist_ok=True)
    tokenizer = build_tiny_tokenizer(pad_vocab_to=QWEN_BPE_SIZE)
    ids = {
        "image_token_id": tokenizer.convert_tokens_to_ids("<|image_pad|>"),
        "video_token_id": tokenizer.convert_tokens_to_ids("<|video_pad|>"),
        "vision_start_token_id": tokenizer.convert_tokens_to_ids("<|vision_start|>"),
        "vision_end_token_id": tokenizer.convert_tokens_to_ids("<|vision_end|>"),
    }
    text = dict(
        QWEN3_VL_4B_TEXT,
        eos_token_id=tokenizer.convert_tokens_to_ids("<|im_end|>"),
        pad_token_id=tokenizer.pad_token_id,
    )
    config = Qwen3VLConfig(text_config=text, vision_config=QWEN3_VL_4B_VISION, **ids)
    config.architectures = ["Qwen3VLForConditionalGeneration"]
    config.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    (folder / "chat_template.jinja").write_text(tokenizer.chat_template)
    if importlib.util.find_spec("PIL") is not None:  # the step part feeds pixel tensors and needs none
        build_tiny_image_processor("qwen3_vl", max_pixels=IMAGE_SIZE[0] * IMAGE_SIZE[1]).save_pretrained(
            folder
        )
    return folder


@contextlib.contextmanager
def vllm_dummy_weights(enabled: bool = True) -> Iterator[None]:
    """Make every `vllm.LLM` (TRL's colocated engine, spatial-eval's) start from dummy weights, eagerly."""
    if not enabled:
        yield
        return
    import vllm

    targets = [vllm]
    with contextlib.suppress(ImportError):
        import trl.generation.vllm_generation as generation

        targets.append(generation)
    original = vllm.LLM

    def make_llm(*args, **kwargs):
        kwargs.setdefault("load_format", "dummy")
        kwargs.setdefault("enforce_eager", True)
        return original(*args, **kwargs)

    for module in targets:
        module.LLM = make_llm
    try:
        yield
    finally:
        for module in targets:
            module.LLM = original


def _vllm_installed() -> bool:
    import importlib.util

    return importlib.util.find_spec("vllm") is not None


def _peak_memory_gib(device: str) -> float:
    if device == "cuda":
        import torch

        return torch.cuda.max_memory_allocated() / 2**30
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # KiB on Linux


# -- parts -------------------------------------------------------------------------------------------


def run_grounding(dry_run: bool, work: Path) -> dict:
    """Images per second of the detector, one image at a time vs batched."""
    missing = _missing("PIL", "pydantic")
    if missing:
        return {"status": "skipped", "reason": f"needs {', '.join(missing)} (install the wheelhouse)"}
    import numpy as np
    import torch
    from PIL import Image

    from assets.grounding.detector import (
        DetectorSettings,
        GroundingDinoDetector,
        build_tiny_grounding_dino,
        load_grounding_dino,
    )

    device = "cpu" if dry_run else "cuda"
    dtype = "float32" if dry_run else "float16"
    count, batch, size = (4, 2, (64, 48)) if dry_run else (64, 16, (1280, 960))
    folder = build_tiny_grounding_dino(
        work / "grounding_dino",
        full_size=not dry_run,
        image_size=(64, 96) if dry_run else (800, 1333),
        score_scale=0.1 if dry_run else 1.0,
    )
    model, processor, device = load_grounding_dino(str(folder), device, dtype)
    generator = np.random.default_rng(0)
    images = [
        Image.fromarray(generator.integers(0, 255, size=(size[1], size[0], 3), dtype=np.uint8))
        for _ in range(count)
    ]
    phrases = [list(LABELS)] * count
    rates = {}
    for batch_size in (1, batch):
        settings = DetectorSettings(model=str(folder), batch_size=batch_size, device=device, dtype=dtype)
        detector = GroundingDinoDetector(settings, model=model, processor=processor)
        detector.detect(images[:batch_size], phrases[:batch_size])  # warm-up
        if device == "cuda":
            torch.cuda.synchronize()
        started = time.perf_counter()
        detector.detect(images, phrases)
        if device == "cuda":
            torch.cuda.synchronize()
        rates[str(batch_size)] = count / (time.perf_counter() - started)
    return {
        "status": "ok",
        "device": device,
        "dtype": dtype,
        "images": count,
        "image_size": list(size),
        "parameters": sum(parameter.numel() for parameter in model.parameters()),
        "images_per_second": rates,
        "speedup": rates[str(batch)] / rates["1"],
    }


def run_step(dry_run: bool, confidence: bool, work: Path) -> dict:
    """One 3,072-token GRPO step of the 4B shape (`grpo_step.py`), with the preflight's estimate beside it."""
    from grpo_step import preflight_estimate
    from grpo_step import run_step as step

    from training.testing import build_tiny_model

    if dry_run:
        folder = build_tiny_model(work / "model")
        result = step(
            folder,
            confidence,
            "cpu",
            batch=4,
            completion=48,
            prompt_text_tokens=16,
            image_size=(64, 64),
            group=2,
            steps=2,
        )
    else:
        import torch

        if not torch.cuda.is_available():
            return {"status": "skipped", "reason": "no CUDA GPU (use --dry-run on the CPU)"}
        folder = write_qwen3_vl_4b_folder(work / "model")
        result = step(folder, confidence, "cuda")
    result["estimate"] = preflight_estimate(
        folder, result["batch"], result["sequence"], result["completion"], result["image_tokens"]
    )
    return result


def _missing(*modules: str) -> list[str]:
    import importlib.util

    return [module for module in modules if importlib.util.find_spec(module) is None]


PROJECT_PACKAGES = ("assets", "data_contracts", "model_clients", "pipelines", "readers", "training")
"""The project's own packages: a missing one is a broken checkout, not a part to skip."""


def _skipped_for(error: ModuleNotFoundError) -> dict:
    """The result of a part whose imports need a dependency this machine lacks (re-raises for the project's own)."""
    top = (error.name or "").split(".")[0]
    if not top or top in PROJECT_PACKAGES:
        raise error
    return {"status": "skipped", "reason": f"needs {top}, a project dependency (not on a bare GPU machine)"}


def run_grpo(dry_run: bool, confidence: bool, work: Path, steps: int = 3) -> dict:
    """`steps` GRPO steps; median step time after the first, peak memory, boxes per completion."""
    missing = _missing("trl", "peft", "datasets", "polars", "dataframely")
    if missing:
        return {
            "status": "skipped",
            "reason": f"needs {', '.join(missing)} (not on a bare GPU machine; the step part measures the GPU work)",
        }
    try:
        import torch
        from transformers import AutoConfig, AutoModelForImageTextToText
        from trl import GRPOConfig

        from training.data import load_training_data
        from training.grpo_trainer import SpatialGRPOTrainer
        from training.models import SpatialModelConfig, load_model, load_processor, prepare_policy
        from training.rewards import get_reward_funcs
    except ModuleNotFoundError as error:
        return _skipped_for(error)
    from training.testing import (
        SPATIALCORE_COMPLETIONS,
        build_tiny_model,
        scripted_generation,
        write_tiny_training_tables,
    )

    use_vllm = not dry_run and _vllm_installed()
    device = "cpu" if dry_run else "cuda"
    if dry_run:
        folder = build_tiny_model(work / "model")
        model = load_model(SpatialModelConfig(model_name_or_path=str(folder), dtype="float32"))
    else:
        folder = write_qwen3_vl_4b_folder(work / "model")
        torch.manual_seed(0)
        with torch.device("cuda"):
            model = AutoModelForImageTextToText.from_config(
                AutoConfig.from_pretrained(folder), dtype=torch.bfloat16, attn_implementation="sdpa"
            )
        model.config._name_or_path = str(folder)  # vLLM loads the engine from this folder
    data_root = write_tiny_training_tables(
        work / "data", rows=16, image_size=(64, 48) if dry_run else IMAGE_SIZE
    )
    model_args = SpatialModelConfig(
        model_name_or_path=str(folder),
        use_peft=True,
        lora_r=32,
        lora_alpha=64,
        lora_dropout=0.05,
        vision_lora=True,
        vision_lora_r=4,
        vision_lora_alpha=8,
    )
    model, peft_config = prepare_policy(model, model_args)
    data = load_training_data(data_root, "spatialcore_train", "spatialcore", "qwen3_vl")
    config = GRPOConfig(
        output_dir=str(work / "out"),
        max_steps=2 if dry_run else steps,
        per_device_train_batch_size=4 if dry_run else 8,
        num_generations=2 if dry_run else 4,
        max_completion_length=48 if dry_run else 256,
        temperature=1.0,
        learning_rate=5e-5,
        beta=0.01,
        loss_type="grpo",
        mask_truncated_completions=True,
        use_cpu=dry_run,
        bf16=not dry_run,
        gradient_checkpointing=not dry_run,
        use_vllm=use_vllm,
        vllm_mode="colocate",
        vllm_gpu_memory_utilization=0.3,
        vllm_max_model_length=2048,
        vllm_importance_sampling_correction=True,
        vllm_structured_outputs_regex=COMPLETION_REGEX if use_vllm else None,
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        seed=0,
    )
    reward = "spatialcore_reward" if confidence else "spatialcore_no_confidence_reward"
    processor = load_processor(folder, "qwen3_vl")
    if device == "cuda":
        torch.cuda.reset_peak_memory_stats()
    with vllm_dummy_weights(use_vllm):
        trainer = SpatialGRPOTrainer(
            model=model,
            reward_funcs=get_reward_funcs([reward]),
            args=config,
            train_dataset=data.dataset,
            processing_class=processor,
            peft_config=peft_config,
            prompt_format="spatialcore",
            box_entropy_source="auto" if confidence else "none",
        )
        scripted = (
            scripted_generation(processor.tokenizer, SPATIALCORE_COMPLETIONS)
            if not use_vllm
            else contextlib.nullcontext()
        )
        with scripted:
            trainer.train()
    history = trainer.state.log_history
    step_times = [entry["step_time"] for entry in history if "step_time" in entry]
    boxes = [
        entry["spatialcore/boxes_per_completion"]
        for entry in history
        if "spatialcore/boxes_per_completion" in entry
    ]
    return {
        "status": "ok",
        "device": device,
        "generation": "vLLM colocate"
        if use_vllm
        else ("transformers (no vLLM installed)" if not dry_run else "transformers"),
        "entropy_source": trainer.entropy_source,
        "steps": len(step_times),
        "step_times_s": step_times,
        "step_time_s": statistics.median(step_times[1:] or step_times),
        "peak_memory_gib": _peak_memory_gib(device),
        "boxes_per_completion": statistics.mean(boxes) if boxes else None,
    }


def run_eval(dry_run: bool, work: Path, items: int = 50) -> dict:
    """Wall time of `spatial-eval` on `items` OmniSpatial-layout items; skipped, with the reason, where a package it
    needs is not installed."""
    use_vllm = not dry_run
    missing = _missing("trl", "peft", "polars", "dataframely")
    if missing:
        return {"status": "skipped", "reason": f"needs {', '.join(missing)} (not on a bare GPU machine)"}
    try:
        from training.eval.cli import main as spatial_eval
        from training.testing import build_tiny_model
    except ModuleNotFoundError as error:
        return _skipped_for(error)
    if use_vllm and not _vllm_installed():
        return {
            "status": "skipped",
            "reason": "vllm is not installed: its wheel cannot be carried to a bare machine",
        }
    items = 4 if dry_run else items
    folder = (
        build_tiny_model(work / "eval_model") if dry_run else write_qwen3_vl_4b_folder(work / "eval_model")
    )
    root = write_omnispatial(work / "omnispatial", items, (64, 48) if dry_run else IMAGE_SIZE)
    arguments = [
        "--model",
        str(folder),
        "--backend",
        "vllm" if use_vllm else "transformers",
        "--benchmarks",
        "omnispatial",
        "--omnispatial-root",
        str(root),
        "--limit",
        str(items),
        "--max-new-tokens",
        "16" if dry_run else "256",
        "--output",
        str(work / "eval"),
        "--allow-failures",
    ]
    if use_vllm:
        arguments += ["--gpu-memory-utilization", "0.5", "--max-model-len", "4096"]
    started = time.perf_counter()
    with vllm_dummy_weights(use_vllm):
        status = spatial_eval(arguments)
    seconds = time.perf_counter() - started
    if status not in (0, 1):
        return {"status": "failed", "reason": f"spatial-eval exited with status {status}"}
    return {
        "status": "ok",
        "backend": "vllm" if use_vllm else "transformers",
        "device": "cpu" if dry_run else "cuda",
        "items": items,
        "seconds": seconds,
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    for name in ("step", "grounding", "grpo", "eval"):
        command = commands.add_parser(name)
        command.add_argument("--json", required=True, help="where to write the result")
        command.add_argument("--dry-run", action="store_true", help="tiny models on the CPU")
        if name in ("grpo", "step"):
            command.add_argument("--confidence", choices=("on", "off"), required=True)
    failed = commands.add_parser("failed", help="record a part that did not finish")
    failed.add_argument("--json", required=True)
    failed.add_argument("--log", required=True)
    table = commands.add_parser("table", help="print the results as one table")
    table.add_argument(
        "results", nargs="+", help="JSON files named step_on, step_off, grounding, grpo_on, grpo_off, eval"
    )
    arguments = parser.parse_args(argv)

    if arguments.command == "table":
        results = {}
        for path in map(Path, arguments.results):
            if path.is_file():
                results[path.stem] = json.loads(path.read_text())
            else:
                results[path.stem] = {"status": "failed", "reason": f"no result ({path.name})"}
        sys.stdout.write(format_table(results) + "\n")
        return 0
    if arguments.command == "failed":
        log = Path(arguments.log)
        lines = (
            [line for line in log.read_text(errors="replace").splitlines() if line.strip()]
            if log.is_file()
            else []
        )
        reason = lines[-1] if lines else "no output (time limit?)"
        Path(arguments.json).write_text(json.dumps({"status": "failed", "reason": reason}))
        return 0
    with tempfile.TemporaryDirectory(prefix="gpu-bench-") as folder:
        work = Path(folder)
        if arguments.command == "step":
            result = run_step(arguments.dry_run, arguments.confidence == "on", work)
        elif arguments.command == "grounding":
            result = run_grounding(arguments.dry_run, work)
        elif arguments.command == "grpo":
            result = run_grpo(arguments.dry_run, arguments.confidence == "on", work)
        else:
            result = run_eval(arguments.dry_run, work)
    Path(arguments.json).write_text(json.dumps(result, indent=1))
    sys.stdout.write(json.dumps(result) + "\n")
    return 0 if result["status"] in ("ok", "skipped") else 1


if __name__ == "__main__":
    raise SystemExit(main())
