"""`spatial-eval`: evaluate a model (and its adapter) on the spatial benchmarks, with paper-style reports.

Usage::

    spatial-eval --model Qwen/Qwen3-VL-8B-Thinking --adapter runs/spatialcore-8b \\
        --benchmarks omnispatial,spatialab --backend vllm --output results/spatialcore-8b \\
        --omnispatial-root data/OmniSpatial/test --spatialab-path data/SpatiaLab/spatialab.json \\
        --grounding-analysis --pseudo-gt data/spatialcore_test_pseudo_gt.parquet
    spatial-eval --model Qwen/Qwen2.5-VL-7B-Instruct --adapter runs/spatialthinker-7b \\
        --benchmarks cvbench,3dsrbench,blink --cvbench-path data/CV-Bench --3dsrbench-path data/3dsrbench.tsv \\
        --blink-path data/BLINK --backend transformers --output results/spatialthinker-7b
    spatial-eval --model gpt-4o --backend openai --benchmarks spatialab --output results/gpt-4o
    spatial-eval --model data/tiny-model --benchmarks omnispatial --output /tmp/eval --limit 4   # sample world

Without benchmark paths the OmniSpatial-like test split and the SpatiaLab-like table of the sample
world under the storage root (``$SPATIAL_DATA_ROOT``, else ``$DAGSTER_HOME/spatial_data``, else
``./data``) are used. Completions are cached per model, adapter and benchmark in the output folder: an
interrupted run continues where it stopped, and a rerun only scores. Every run evaluated into the same output
folder appears in its ``report.md`` / ``report.csv`` / ``report.json``.

Exit status: 0 when every answer came back; 1 when any request of this run failed (the failed
answers are scored 0 and marked in every table; they are not cached, so rerunning the same command
retries only them), unless ``--allow-failures``; 2 for bad input (a missing benchmark folder or
file, a model that is neither a folder nor in the Hugging Face cache, an unknown model family, an adapter
that does not change the model), with a one-line error.

The console prints one line per benchmark with the number its paper table shows (CircularEval for
3DSRBench, the accuracy of the original items otherwise), the other metrics where the data has
rotated or flipped variants (vanilla, CircularEval, FlipEval), and the unparseable, truncated and
failed counts.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

from data_contracts.boxes import UnknownModelFamilyError
from readers.common import MissingInputError
from training.eval.backends import ADAPTER_MODES, AdapterNotAppliedError, GenerationSettings
from training.eval.benchmarks import (
    BENCHMARK_NAMES,
    BenchmarkSources,
    split_benchmark_locations,
)
from training.eval.reports import console_lines
from training.eval.runner import EvalRunConfig, run_evaluation
from training.settings_flags import add_settings_flags, settings_from_args

logger = logging.getLogger("training.eval.cli")

USER_ERRORS = (
    MissingInputError,
    UnknownModelFamilyError,
    AdapterNotAppliedError,
    FileNotFoundError,
    ImportError,
    ValueError,
)


SOURCE_FLAGS = {
    "spatialab_images_dir": "--spatialab-images",
    "threedsrbench_path": "--3dsrbench-path",
    "dge_tasks_path": "--dge-path",
    "pseudo_gt_path": "--pseudo-gt",
}
"""Benchmark-source fields whose flag is not the field's name."""


def make_parser() -> argparse.ArgumentParser:
    """The argument parser of ``spatial-eval``: the run, decoding and benchmark-source flags come from their
    settings models (:class:`EvalRunConfig`, :class:`GenerationSettings`, :class:`BenchmarkSources`); the
    backend options, the benchmark list and the output folder are written here."""
    parser = argparse.ArgumentParser(
        prog="spatial-eval",
        description="Evaluate a vision-language model on spatial benchmarks with strict scoring and paper-style tables.",
    )
    model = parser.add_argument_group("model")
    add_settings_flags(
        model,
        EvalRunConfig,
        skip=(
            "benchmarks",
            "output_dir",
            "generation",
            "sources",
            "backend_options",
            "limit",
            "grounding_analysis",
        ),
    )

    generation = parser.add_argument_group("generation")
    add_settings_flags(generation, GenerationSettings)
    generation.add_argument(
        "--device", default=None, help="transformers: cuda, cpu... (the GPU when there is one)."
    )
    generation.add_argument("--dtype", default="auto", help="transformers: bfloat16, float32 or auto.")
    generation.add_argument(
        "--attn-implementation", default=None, help="transformers: e.g. flash_attention_2."
    )
    generation.add_argument(
        "--adapter-mode",
        choices=ADAPTER_MODES,
        default="auto",
        help="vllm: serve the adapter as LoRA, merge it first, or auto (merge when it adapts the vision encoder).",
    )
    generation.add_argument("--tensor-parallel-size", type=int, default=1)
    generation.add_argument("--gpu-memory-utilization", type=float, default=0.9)
    generation.add_argument("--max-model-len", type=int, default=None)
    generation.add_argument(
        "--base-url", default=None, help="openai: API root, e.g. http://localhost:8000/v1."
    )
    generation.add_argument(
        "--api-key-env", default="OPENAI_API_KEY", help="openai: environment variable holding the key."
    )
    generation.add_argument("--api-provider", choices=("openai", "anthropic"), default="openai")
    generation.add_argument("--max-concurrency", type=int, default=8)

    data = parser.add_argument_group("benchmarks")
    data.add_argument(
        "--benchmarks",
        default="omnispatial",
        help=f"Comma-separated: {', '.join(BENCHMARK_NAMES)} (aliases: stvqa, dge, cv-bench), or all; "
        "name=LOCATION reads that benchmark from a folder or a Hub dataset (hf://datasets/OWNER/NAME[@REV]).",
    )
    add_settings_flags(data, EvalRunConfig, only=["limit"])
    add_settings_flags(data, BenchmarkSources, renamed=SOURCE_FLAGS)

    output = parser.add_argument_group("output")
    output.add_argument("--output", required=True, help="Output folder (cache, scores, reports).")
    add_settings_flags(output, EvalRunConfig, only=["grounding_analysis"])
    output.add_argument(
        "--allow-failures",
        action="store_true",
        help="Exit 0 even when requests failed (they are still scored 0 and marked in the report).",
    )
    output.add_argument("--log-level", default="INFO")
    return parser


def config_from_args(args: argparse.Namespace) -> EvalRunConfig:
    """The run configuration the parsed arguments describe."""
    if args.backend == "transformers":
        options = {
            "device": args.device,
            "dtype": args.dtype,
            "attn_implementation": args.attn_implementation,
        }
    elif args.backend == "vllm":
        options = {
            "adapter_mode": args.adapter_mode,
            "tensor_parallel_size": args.tensor_parallel_size,
            "gpu_memory_utilization": args.gpu_memory_utilization,
            "max_model_len": args.max_model_len,
        }
    else:
        options = {
            "base_url": args.base_url,
            "api_key_env": args.api_key_env,
            "provider": args.api_provider,
            "max_concurrency": args.max_concurrency,
        }
    names, locations = split_benchmark_locations(args.benchmarks)
    return settings_from_args(
        args,
        EvalRunConfig,
        benchmarks=names,
        output_dir=args.output,
        generation=settings_from_args(args, GenerationSettings),
        sources=settings_from_args(args, BenchmarkSources).with_locations(locations),
        backend_options={key: value for key, value in options.items() if value is not None},
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``spatial-eval``; returns the exit status (0 done, 1 failed requests, 2 bad input)."""
    parser = make_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=getattr(logging, str(args.log_level).upper(), logging.INFO),
        format="%(levelname)s %(name)s: %(message)s",
    )
    try:
        config = config_from_args(args)
        result = run_evaluation(config)
    except USER_ERRORS as error:
        sys.stderr.write(f"spatial-eval: error: {error}\n")
        return 2
    for line in console_lines(result.report, result.run_name):
        sys.stdout.write(line + "\n")
    sys.stdout.write(f"report: {result.report_paths['markdown']}\n")
    failed = int((result.scores["status"] == "error").sum())
    if failed:
        sys.stderr.write(
            f"spatial-eval: {failed} of {result.scores.height} requests failed (scored 0, marked in the report); "
            "rerun the same command to retry them"
            + (" (--allow-failures: exit status 0)\n" if args.allow_failures else "\n")
        )
        if not args.allow_failures:
            return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
