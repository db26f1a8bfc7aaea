"""Speed of the reward functions: completions per second for each reward, on one core.

Builds a synthetic batch (default 4,096 completions) with realistic lengths: SpatialCORE completions
with 3 predicted boxes against 3 pseudo-GT boxes and ~4,000 characters of reasoning (about 900
tokens; also scored with per-token entropies as the trainer passes them), SpatialThinker completions
with a 3-object scene graph, and DGE completions (half multiple choice, half numeric with units).
Each reward is called through its trainer-facing function in GRPO-sized batches.

Usage::

    python benchmarks/bench_rewards.py [--completions 4096] [--batch-size 64] [--repeats 3]
    python benchmarks/bench_rewards.py --tiny    # seconds-long smoke run (explicit flags still win)

Target: under 1 ms per completion (> 1,000 completions/s) for every reward.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

import argparse
import json
import logging
import random
import re
import sys
import time
from collections.abc import Callable

from training.rewards import dge_reward, spatialcore_reward, spatialthinker_reward

# fmt: off
WORDS = (
    "the", "object", "on", "left", "appears", "closer", "to", "camera", "than", "one", "near", "window",
    "so", "relative", "position", "suggests", "that", "moving", "forward", "would", "bring", "it", "into",
    "reach", "while", "shelf", "stays", "behind",
)
# fmt: on
LABELS = ["black sedan", "traffic light", "red cup", "wooden chair", "person in blue", "white table", "lamp"]
# Qwen-like pre-tokenisation: single digits, words with a leading space, punctuation runs, spaces.
TOKEN_PATTERN = re.compile(r"\d| ?[A-Za-z]+| ?[^\sA-Za-z\d]+|\s+")
TINY = {"completions": 32, "batch_size": 16, "repeats": 1, "reasoning_chars": 400}
"""Defaults under `--tiny`: a smoke run of a few seconds."""


def random_box(rng: random.Random, scale: int = 1000) -> list[int]:
    x1, y1 = rng.randrange(0, scale - 100), rng.randrange(0, scale - 100)
    return [x1, y1, rng.randrange(x1 + 20, scale), rng.randrange(y1 + 20, scale)]


def jitter(box: list[int], rng: random.Random, limit: int = 1000) -> list[int]:
    x1, y1, x2, y2 = (min(max(value + rng.randint(-30, 30), 0), limit) for value in box)
    return [x1, y1, max(x2, x1 + 1), max(y2, y1 + 1)]


def reasoning(rng: random.Random, n_characters: int) -> str:
    words: list[str] = []
    while sum(len(word) + 1 for word in words) < n_characters:
        words.append(rng.choice(WORDS))
    return " ".join(words) + "."


def spatialcore_batch(
    rng: random.Random, n: int, reasoning_chars: int = 4000
) -> tuple[list[str], dict[str, list]]:
    completions, columns = (
        [],
        {"answer": [], "options": [], "question": [], "pseudo_gt": [], "box_entropies": []},
    )
    for _ in range(n):
        labels = rng.sample(LABELS, 3)
        gt_boxes = [random_box(rng) for _ in labels]
        pseudo_gt = [
            {"bbox_2d": box, "label": label, "validity": round(rng.uniform(0.3, 0.95), 2)}
            for box, label in zip(gt_boxes, labels, strict=True)
        ]
        lines = [
            json.dumps({"bbox_2d": jitter(box, rng), "label": label})
            for box, label in zip(gt_boxes, labels, strict=True)
        ]
        text = "\n".join([*lines, reasoning(rng, reasoning_chars)]) + "</think>" + rng.choice("ABCD")
        tokens = TOKEN_PATTERN.findall(text)
        completions.append(text)
        columns["answer"].append(rng.choice("ABCD"))
        columns["options"].append(["go left", "go a bit right", "stop", "turn around"])
        columns["question"].append(f"Where is the {labels[0]} relative to the {labels[1]}?")
        columns["pseudo_gt"].append(pseudo_gt)
        columns["box_entropies"].append({"tokens": tokens, "entropies": [rng.uniform(0, 3) for _ in tokens]})
    return completions, columns


def spatialthinker_batch(rng: random.Random, n: int) -> tuple[list[str], dict[str, list]]:
    completions, columns = (
        [],
        {"answer_option_text": [], "gt_scene": [], "image_width": [], "image_height": []},
    )
    for _ in range(n):
        width, height = rng.choice([(640, 480), (800, 600), (1024, 768)])
        names = rng.sample(["mug", "table", "chair", "lamp", "person", "car"], 3)
        gt_objects = [{"id": f"{name}.1", "bbox_2d": random_box(rng)} for name in names]
        relations = [{"subject": f"{names[0]}.1", "predicate": "on", "object": f"{names[1]}.1"}]
        predicted = [
            {
                "id": obj["id"],
                "bbox": [
                    round(v * s / 1000)
                    for v, s in zip(jitter(obj["bbox_2d"], rng), (width, height, width, height), strict=True)
                ],
            }
            for obj in gt_objects
        ]
        scene = json.dumps({"objects": predicted, "relationships": relations})
        answer = rng.choice(["(A) left", "(B) right"])
        completions.append(
            f"<observe>{reasoning(rng, 300)}</observe>\n<scene>{scene}</scene>\n"
            f"<think>{reasoning(rng, 1000)}</think>\n<answer>{answer}</answer>"
        )
        columns["answer_option_text"].append("(A) left")
        columns["gt_scene"].append({"objects": gt_objects, "relationships": relations})
        columns["image_width"].append(width)
        columns["image_height"].append(height)
    return completions, columns


def dge_batch(rng: random.Random, n: int) -> tuple[list[str], dict[str, list]]:
    completions = []
    columns = {"answer": [], "options": [], "numeric_answer": [], "unit": [], "task_type": []}
    for index in range(n):
        if index % 2:
            value = round(rng.uniform(0.5, 6.0), 2)
            predicted = rng.choice([f"{value * rng.uniform(0.7, 1.3):.2f} m", f"{value * 100:.0f} cm"])
            completions.append(f"<think>{reasoning(rng, 800)}</think><answer>{predicted}</answer>")
            columns["answer"].append(str(value))
            columns["options"].append([])
            columns["numeric_answer"].append(value)
            columns["unit"].append("m")
            columns["task_type"].append("absolute_distance")
        else:
            completions.append(f"<think>{reasoning(rng, 800)}</think><answer>{rng.choice('ABCD')}</answer>")
            columns["answer"].append(rng.choice("ABCD"))
            columns["options"].append(["front-left", "front-right", "back-left", "back-right"])
            columns["numeric_answer"].append(None)
            columns["unit"].append(None)
            columns["task_type"].append("relative_direction")
    return completions, columns


def time_reward(
    reward: Callable, completions: list[str], columns: dict[str, list], batch_size: int, repeats: int
) -> float:
    """Best wall time over ``repeats`` of scoring all completions in batches."""
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        for offset in range(0, len(completions), batch_size):
            window = slice(offset, offset + batch_size)
            reward(
                completions[window],
                **{name: values[window] for name, values in columns.items()},
                log_metric=lambda name, value: None,
            )
        best = min(best, time.perf_counter() - start)
    return best


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--completions", type=int, default=4096, help="completions per reward")
    parser.add_argument("--batch-size", type=int, default=64, help="completions per reward call")
    parser.add_argument("--repeats", type=int, default=3, help="timed repetitions (best is reported)")
    parser.add_argument("--reasoning-chars", type=int, default=4000, help="SpatialCORE reasoning length")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--tiny", action="store_true", help="tiny sizes for a smoke run")
    if parser.parse_known_args(argv)[0].tiny:
        parser.set_defaults(**TINY)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    rng = random.Random(args.seed)

    core_completions, core_columns = spatialcore_batch(rng, args.completions, args.reasoning_chars)
    core_without_entropies = {
        name: values for name, values in core_columns.items() if name != "box_entropies"
    }
    cases = [
        ("spatialcore_reward", spatialcore_reward, core_completions, core_without_entropies),
        ("spatialcore_reward + box_entropies", spatialcore_reward, core_completions, core_columns),
        ("spatialthinker_reward", spatialthinker_reward, *spatialthinker_batch(rng, args.completions)),
        ("dge_reward", dge_reward, *dge_batch(rng, args.completions)),
    ]
    mean_tokens = sum(len(entry["tokens"]) for entry in core_columns["box_entropies"]) / len(core_completions)
    mean_chars = sum(len(text) for text in core_completions) / len(core_completions)
    sys.stdout.write(
        f"{args.completions} completions per reward, batches of {args.batch_size}, best of {args.repeats}; "
        f"SpatialCORE completions: {mean_chars:.0f} characters, {mean_tokens:.0f} tokens on average\n"
    )
    sys.stdout.write(f"{'reward':<38}{'completions/s':>15}{'us/completion':>16}\n")
    for name, reward, completions, columns in cases:
        seconds = time_reward(reward, completions, columns, args.batch_size, args.repeats)
        per_completion = seconds / len(completions)
        sys.stdout.write(f"{name:<38}{len(completions) / seconds:>15,.0f}{per_completion * 1e6:>16.1f}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
