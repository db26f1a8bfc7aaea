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
interrupted run continues where it stopped, and a rerun only scores. Every run evaluated into the same output folder appears in its
``report.md`` / ``report.csv`` / ``report.json``.

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
from training.eval.backends import ADAPTER_MODES, BACKENDS, AdapterNotAppliedError, GenerationSettings
from training.eval.benchmarks import (
    BENCHMARK_NAMES,
    BLINK_SPATIAL_SUBSETS,
    BenchmarkSources,
    split_benchmark_locations,
)
from training.eval.reports import console_lines
from training.eval.runner import PROMPT_FORMAT_CHOICES, EvalRunConfig, run_evaluation

logger = logging.getLogger("training.eval.cli")

USER_ERRORS = (
    MissingInputError,
    UnknownModelFamilyError,
    AdapterNotAppliedError,
    FileNotFoundError,
    ImportError,
    ValueError,
)


def make_parser() -> argparse.ArgumentParser:
    """The argument parser of ``spatial-eval``."""
    parser = argparse.ArgumentParser(
        prog="spatial-eval",
        description="Evaluate a vision-language model on spatial benchmarks with strict scoring and paper-style tables.",
    )
    model = parser.add_argument_group("model")
    model.add_argument(
        "--model", required=True, help="Model folder or name (the API model name with --backend openai)."
    )
    model.add_argument("--adapter", default=None, help="LoRA adapter folder applied to the model.")
    model.add_argument("--backend", choices=BACKENDS, default="transformers", help="Inference backend.")
    model.add_argument(
        "--family",
        default=None,
        help="Box-convention family (qwen2_vl, qwen2_5_vl, qwen3_vl); read from the config by default.",
    )
    model.add_argument(
        "--prompt-format",
        choices=PROMPT_FORMAT_CHOICES,
        default="auto",
        help="Output format asked for: spatialcore, spatialthinker, or auto (SpatialCORE for Qwen3-VL).",
    )
    model.add_argument("--run-name", default=None, help="Name of the run in the reports.")

    generation = parser.add_argument_group("generation")
    generation.add_argument("--max-new-tokens", type=int, default=2048)
    generation.add_argument("--temperature", type=float, default=0.0, help="0 is greedy decoding.")
    generation.add_argument("--top-p", type=float, default=1.0)
    generation.add_argument("--batch-size", type=int, default=8)
    generation.add_argument("--seed", type=int, default=0)
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
    data.add_argument("--limit", type=int, default=None, help="Only the first N questions of each benchmark.")
    data.add_argument("--storage-root", default=None, help="Storage root of the default sources and tables.")
    data.add_argument("--omnispatial-root", default=None)
    data.add_argument(
        "--omnispatial-split",
        choices=("all", "test", "train"),
        default=None,
        help="all (a given folder) or the hash split of the sample world (default test for it).",
    )
    data.add_argument("--spatialab-path", default=None)
    data.add_argument("--spatialab-images", default=None)
    data.add_argument("--cvbench-path", default=None)
    data.add_argument("--3dsrbench-path", dest="threedsrbench_path", default=None)
    data.add_argument("--blink-path", default=None)
    data.add_argument("--blink-subsets", default=",".join(BLINK_SPATIAL_SUBSETS))
    data.add_argument("--stvqa-path", default=None)
    data.add_argument("--stvqa-split", default="val")
    data.add_argument("--dge-path", default=None)
    data.add_argument("--dge-split", default="test")
    data.add_argument(
        "--pseudo-gt",
        default=None,
        help="Table with question_id and pseudo_gt boxes for the grounding analysis.",
    )
    data.add_argument(
        "--circular", action="store_true", help="Add CircularEval rotations of every multiple-choice item."
    )

    output = parser.add_argument_group("output")
    output.add_argument("--output", required=True, help="Output folder (cache, scores, reports).")
    output.add_argument(
        "--grounding-analysis",
        action="store_true",
        help="Score box coordinate-digit entropies and write Figures 4 and 5.",
    )
    output.add_argument(
        "--allow-failures",
        action="store_true",
        help="Exit 0 even when requests failed (they are still scored 0 and marked in the report).",
    )
    output.add_argument("--log-level", default="INFO")
    return parser


def config_from_args(args: argparse.Namespace) -> EvalRunConfig:
    """The run configuration the parsed arguments describe."""
    generation = GenerationSettings(
        max_new_tokens=args.max_new_tokens,
        temperature=args.temperature,
        top_p=args.top_p,
        batch_size=args.batch_size,
        seed=args.seed,
    )
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
    sources = BenchmarkSources(
        storage_root=args.storage_root,
        omnispatial_root=args.omnispatial_root,
        omnispatial_split=args.omnispatial_split,
        spatialab_path=args.spatialab_path,
        spatialab_images_dir=args.spatialab_images,
        cvbench_path=args.cvbench_path,
        threedsrbench_path=args.threedsrbench_path,
        blink_path=args.blink_path,
        blink_subsets=[part.strip() for part in args.blink_subsets.split(",") if part.strip()],
        stvqa_path=args.stvqa_path,
        stvqa_split=args.stvqa_split,
        dge_tasks_path=args.dge_path,
        dge_split=args.dge_split,
        pseudo_gt_path=args.pseudo_gt,
        circular=args.circular,
    ).with_locations(locations)
    return EvalRunConfig(
        model=args.model,
        adapter=args.adapter,
        backend=args.backend,
        benchmarks=names,
        output_dir=args.output,
        run_name=args.run_name,
        prompt_format=args.prompt_format,
        family=args.family,
        limit=args.limit,
        generation=generation,
        grounding_analysis=args.grounding_analysis,
        sources=sources,
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
