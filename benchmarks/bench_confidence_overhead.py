"""Cost of confidence weighting in a GRPO step: step time and peak memory, with vs without.

Same model, same batch, same completions (scripted, so both runs emit identical tokens with boxes):

* **with**: `spatialcore_reward` fed `box_entropies` (the trainer records the entropies during
  generation, decodes the tokens and finds the coordinate digits);
* **without**: `spatialcore_no_confidence_reward`, `box_entropy_source: none`.

Step time is measured in one process whose steps alternate between the two configurations
(A B B A ..., after a warm-up of one step each), so a busy shared machine slows both alike; the
script prints the median wall and process-CPU step time of each. Peak memory is per process, so
each configuration also runs alone for it. Targets: at most 1.05 in time, 1.01 in memory. The
time spent in the confidence-specific code itself (generation hook, token decoding, digit location)
is timed directly too, since step-to-step noise on a shared CPU is several percent.

    python benchmarks/bench_confidence_overhead.py                       # small model on the CPU
    python benchmarks/bench_confidence_overhead.py --size 4b --device cuda --completion-tokens 512 --steps 2
    python benchmarks/bench_confidence_overhead.py --tiny     # smoke run: 2-layer model, one step each, one thread

`--tiny` runs torch on one thread per process: on a busy two-core machine, torch's spinning OpenMP
threads made a tiny step ten times slower.

`--size 4b` builds a Qwen3-VL-4B-shaped model (36 layers, hidden 2560, vocabulary 151,936) with
random weights; peak memory is `torch.cuda.max_memory_allocated` on a GPU and the process's peak
resident set size on the CPU.
"""

from __future__ import annotations

import argparse
import json
import logging
import multiprocessing
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

logger = logging.getLogger("bench_confidence_overhead")

QWEN3_VL_4B_TEXT = {
    "hidden_size": 2560,
    "intermediate_size": 9728,
    "num_hidden_layers": 36,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "vocab_size": 151936,
    "rope_parameters": {
        "rope_type": "default",
        "rope_theta": 5000000.0,
        "mrope_section": [24, 20, 20],
        "mrope_interleaved": True,
    },
}
QWEN3_VL_4B_VISION = {
    "depth": 24,
    "hidden_size": 1024,
    "intermediate_size": 4096,
    "num_heads": 16,
    "out_hidden_size": 2560,
    "num_position_embeddings": 2304,
    "deepstack_visual_indexes": [5, 11, 17],
}
SMALL_TEXT = {
    "hidden_size": 256,
    "intermediate_size": 768,
    "num_hidden_layers": 4,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 64,
    "vocab_size": 32768,
    "rope_parameters": {
        "rope_type": "default",
        "rope_theta": 500000.0,
        "mrope_section": [8, 12, 12],
        "mrope_interleaved": True,
    },
}
SMALL_VISION = {
    "depth": 2,
    "hidden_size": 128,
    "intermediate_size": 256,
    "num_heads": 4,
    "out_hidden_size": 256,
    "num_position_embeddings": 256,
    "deepstack_visual_indexes": [1],
}


TINY_TEXT = {
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 16,
    "vocab_size": 1024,
    "rope_parameters": {
        "rope_type": "default",
        "rope_theta": 500000.0,
        "mrope_section": [2, 3, 3],
        "mrope_interleaved": True,
    },
}
TINY_VISION = {
    "depth": 2,
    "hidden_size": 32,
    "intermediate_size": 64,
    "num_heads": 2,
    "out_hidden_size": 64,
    "num_position_embeddings": 64,
    "deepstack_visual_indexes": [1],
}
MODEL_SHAPES = {
    "tiny": (TINY_TEXT, TINY_VISION),
    "small": (SMALL_TEXT, SMALL_VISION),
    "4b": (QWEN3_VL_4B_TEXT, QWEN3_VL_4B_VISION),
}
TINY = {"size": "tiny", "batch": 4, "generations": 2, "completion_tokens": 48, "steps": 1, "threads": 1}
"""Defaults under `--tiny` (explicit flags still win)."""


def _lengthen(completion: str, tokenizer, target_tokens: int) -> str:
    """Pad the reasoning of a scripted completion (before `</think>`) to about `target_tokens` tokens."""
    filler = " The chair stands left of the lamp, closer to the camera."
    head, _, tail = completion.partition("</think>")
    while len(tokenizer(head + filler + "</think>" + tail)["input_ids"]) < target_tokens:
        head += filler
    return head + "</think>" + tail


class ToggledReward:
    """The SpatialCORE reward with or without confidence weighting, switched between steps."""

    __name__ = "spatialcore_reward"

    def __init__(self, with_confidence_reward, without_confidence_reward):
        self.rewards = {True: with_confidence_reward, False: without_confidence_reward}
        self.with_confidence = True

    def __call__(self, completions, **kwargs):
        return self.rewards[self.with_confidence](completions, **kwargs)


def _step_uses_confidence(step: int) -> bool:
    """A B B A A B B A ... over the steps (0-based), so drift hits both configurations alike."""
    pair, position = divmod(step, 2)
    return position == 0 if pair % 2 == 0 else position == 1


def run_child(arguments) -> None:
    """One measurement in this process (`interleaved` times, `with`/`without` peak memory); writes JSON."""
    import torch
    from transformers import Qwen3VLConfig, TrainerCallback
    from transformers.models.qwen3_vl import Qwen3VLForConditionalGeneration
    from trl import GRPOConfig

    from training.data import load_training_data
    from training.entropy import GenerationEntropyRecorder
    from training.grpo_trainer import SpatialGRPOTrainer
    from training.models import SpatialModelConfig, load_processor, prepare_policy
    from training.rewards import get_reward_funcs
    from training.testing import (
        SPATIALCORE_COMPLETIONS,
        build_tiny_image_processor,
        build_tiny_tokenizer,
        scripted_generation,
        write_tiny_training_tables,
    )

    device = torch.device(arguments.device)
    if arguments.threads > 0:
        torch.set_num_threads(arguments.threads)
    workdir = Path(tempfile.mkdtemp(prefix="bench_confidence_"))
    tokenizer = build_tiny_tokenizer()
    tokenizer.save_pretrained(workdir / "model")
    max_pixels = 448 * 448 if arguments.size == "4b" else None
    build_tiny_image_processor("qwen3_vl", max_pixels=max_pixels).save_pretrained(workdir / "model")
    image_size = (448, 336) if arguments.size == "4b" else (64, 48)
    write_tiny_training_tables(workdir / "data", rows=16, image_size=image_size)

    text, vision = MODEL_SHAPES[arguments.size]
    special = {
        "image_token_id": "<|image_pad|>",
        "video_token_id": "<|video_pad|>",
        "vision_start_token_id": "<|vision_start|>",
        "vision_end_token_id": "<|vision_end|>",
    }
    eos_token_id = tokenizer.convert_tokens_to_ids("<|im_end|>")
    config = Qwen3VLConfig(
        text_config={**text, "eos_token_id": eos_token_id, "pad_token_id": tokenizer.pad_token_id},
        vision_config={**vision, "patch_size": 16, "spatial_merge_size": 2, "temporal_patch_size": 2},
        **{name: tokenizer.convert_tokens_to_ids(token) for name, token in special.items()},
    )
    torch.manual_seed(0)
    previous_dtype = torch.get_default_dtype()
    torch.set_default_dtype(torch.bfloat16 if device.type == "cuda" else torch.float32)
    with device:
        model = Qwen3VLForConditionalGeneration(config)
    torch.set_default_dtype(previous_dtype)
    model.generation_config.eos_token_id = eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model, peft_config = prepare_policy(model, SpatialModelConfig(use_peft=True, lora_r=32, lora_alpha=64))
    data = load_training_data(workdir / "data", "spatialcore_train", "spatialcore", "qwen3_vl")

    # Time spent in the confidence-specific code: the generation hook and the trainer's box entropies
    # (decoding, locating the coordinate digits, gathering their entropies).
    confidence_work = {"seconds": 0.0}

    def timed(function):
        def wrapper(*args, **kwargs):
            if device.type == "cuda":
                torch.cuda.synchronize()
            started = time.perf_counter()
            result = function(*args, **kwargs)
            if device.type == "cuda":
                torch.cuda.synchronize()
            confidence_work["seconds"] += time.perf_counter() - started
            return result

        return wrapper

    GenerationEntropyRecorder._hook = timed(GenerationEntropyRecorder._hook)
    SpatialGRPOTrainer._box_entropies = timed(SpatialGRPOTrainer._box_entropies)

    interleaved = arguments.child == "interleaved"
    warmup = 2 if interleaved else 1
    measured = 2 * arguments.steps if interleaved else 1
    reward = ToggledReward(*get_reward_funcs(["spatialcore_reward", "spatialcore_no_confidence_reward"]))
    reward.with_confidence = arguments.child != "without"
    training_args = GRPOConfig(
        output_dir=str(workdir / "out"),
        per_device_train_batch_size=arguments.batch,
        num_generations=arguments.generations,
        max_completion_length=arguments.completion_tokens + 8,
        max_steps=warmup + measured,
        learning_rate=5e-5,
        beta=0.01,
        logging_steps=1,
        report_to="none",
        save_strategy="no",
        use_cpu=device.type == "cpu",
        bf16=device.type == "cuda",
        gradient_checkpointing=device.type == "cuda",
        seed=0,
    )

    class StepMeter(TrainerCallback):
        """Sets each step's configuration (interleaved runs) and times it; resets the CUDA peak."""

        def __init__(self):
            self.steps: list[dict] = []
            self.trainer = None

        def on_step_begin(self, args, state, control, **kwargs):
            if interleaved:
                reward.with_confidence = _step_uses_confidence(state.global_step)
                self.trainer.entropy_source = "generation" if reward.with_confidence else "none"
            if device.type == "cuda":
                torch.cuda.synchronize()
            self._wall, self._cpu = time.perf_counter(), time.process_time()
            self._work = confidence_work["seconds"]

        def on_step_end(self, args, state, control, **kwargs):
            if device.type == "cuda":
                torch.cuda.synchronize()
            self.steps.append(
                {
                    "with": reward.with_confidence,
                    "wall": time.perf_counter() - self._wall,
                    "cpu": time.process_time() - self._cpu,
                    "confidence_work": confidence_work["seconds"] - self._work,
                }
            )
            if state.global_step == warmup and device.type == "cuda":
                torch.cuda.reset_peak_memory_stats()

    meter = StepMeter()
    trainer = SpatialGRPOTrainer(
        model=model,
        reward_funcs=[reward],
        args=training_args,
        train_dataset=data.dataset,
        processing_class=load_processor(workdir / "model", "qwen3_vl"),
        peft_config=peft_config,
        box_entropy_source="generation" if arguments.child != "without" else "none",
        callbacks=[meter],
    )
    meter.trainer = trainer
    completions = [
        _lengthen(text, tokenizer, arguments.completion_tokens) for text in SPATIALCORE_COMPLETIONS
    ]
    with scripted_generation(tokenizer, completions, seed=0):
        trainer.train()
    if device.type == "cuda":
        peak = torch.cuda.max_memory_allocated()
    else:
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    result = {"steps": meter.steps[warmup:], "peak_bytes": peak}
    Path(arguments.result).write_text(json.dumps(result))


def _run(arguments, child: str, folder: str) -> dict | None:
    """One measurement in a child process: a fresh interpreter, or under ``--tiny`` a fork of this one."""
    result_path = Path(folder) / f"{child}.json"
    options = {key: value for key, value in vars(arguments).items() if key not in ("child", "result", "tiny")}
    child_argv = ["--child", child, "--result", str(result_path)]
    child_argv += [f"--{key.replace('_', '-')}={value}" for key, value in options.items()]
    logger.info("run: %s", child)
    if arguments.tiny:
        process = multiprocessing.get_context("fork").Process(target=main, args=(child_argv,))
        process.start()
        process.join()
        if process.exitcode != 0:  # the child's traceback went to this process's stderr
            return None
    else:
        command = [sys.executable, __file__, *child_argv]
        completed = subprocess.run(command, capture_output=True, text=True, check=False)
        if completed.returncode != 0:
            sys.stderr.write(completed.stderr[-4000:])
            return None
    return json.loads(result_path.read_text())


def _import_the_trainer() -> None:
    """Import what a child imports (torch, transformers, TRL, the trainer), so that forked children share it."""
    import torch  # noqa: F401
    import transformers  # noqa: F401
    import trl  # noqa: F401

    import training.grpo_trainer  # noqa: F401
    import training.testing  # noqa: F401


def orchestrate(arguments) -> int:
    """Time the interleaved run, measure each configuration's peak memory, print the figures.

    A real run starts each child as a fresh interpreter. A ``--tiny`` smoke run imports the trainer once
    and forks its children from this process: three fresh interpreters spent most of its time importing
    torch, transformers and TRL. (Nothing has started a thread or touched a device before the fork.)
    """
    if arguments.tiny:
        _import_the_trainer()
    with tempfile.TemporaryDirectory() as folder:
        timing = _run(arguments, "interleaved", folder)
        with_memory = _run(arguments, "with", folder)
        without_memory = _run(arguments, "without", folder)
    if timing is None or with_memory is None or without_memory is None:
        return 1

    def median(with_confidence: bool, key: str) -> float:
        return statistics.median(step[key] for step in timing["steps"] if step["with"] == with_confidence)

    with_wall, without_wall = median(True, "wall"), median(False, "wall")
    with_cpu, without_cpu = median(True, "cpu"), median(False, "cpu")
    with_peak, without_peak = with_memory["peak_bytes"], without_memory["peak_bytes"]
    work = median(True, "confidence_work")
    memory_kind = "max_memory_allocated" if arguments.device == "cuda" else "peak RSS"
    lines = [
        f"model: {arguments.size} Qwen3-VL shape, device {arguments.device}, "
        f"batch {arguments.batch} completions (G={arguments.generations}), "
        f"~{arguments.completion_tokens} completion tokens, "
        f"{arguments.steps} interleaved steps per configuration",
        "entropy source with confidence weighting: generation hook",
        f"{'':22}{'step wall (s)':>15}{'step CPU (s)':>15}{'peak memory (MiB)':>20}",
        f"{'without confidence':22}{without_wall:>15.3f}{without_cpu:>15.3f}{without_peak / 2**20:>20.1f}",
        f"{'with confidence':22}{with_wall:>15.3f}{with_cpu:>15.3f}{with_peak / 2**20:>20.1f}",
        f"step-time ratio   {with_wall / without_wall:.3f} wall, {with_cpu / without_cpu:.3f} process CPU"
        "   (target <= 1.05)",
        f"peak-memory ratio {with_peak / without_peak:.3f}   (target <= 1.01, {memory_kind})",
        f"confidence-specific work (generation hook + box entropies): {work:.3f} s per step, "
        f"{work / with_wall:.2%} of the step",
    ]
    sys.stdout.write("\n".join(lines) + "\n")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", choices=list(MODEL_SHAPES), default="small")
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--batch", type=int, default=8, help="completions per step")
    parser.add_argument("--generations", type=int, default=4)
    parser.add_argument("--completion-tokens", type=int, default=96)
    parser.add_argument("--steps", type=int, default=6, help="measured steps per configuration")
    parser.add_argument(
        "--threads", type=int, default=0, help="torch CPU threads per process (0: torch's default)"
    )
    parser.add_argument("--child", choices=["interleaved", "with", "without"], help=argparse.SUPPRESS)
    parser.add_argument("--result", help=argparse.SUPPRESS)
    parser.add_argument("--tiny", action="store_true", help="tiny sizes for a smoke run")
    if parser.parse_known_args(argv)[0].tiny:
        parser.set_defaults(**TINY)
    arguments = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    if arguments.child:
        run_child(arguments)
        return 0
    return orchestrate(arguments)


if __name__ == "__main__":
    raise SystemExit(main())
