"""One evaluation run, end to end: load benchmarks, generate (resumably), score strictly, report.

:func:`run_evaluation` is what the ``spatial-eval`` command and the Dagster ``eval_report`` asset
call. Output folder layout::

    <output>/predictions/<model>__<adapter>__<hash>/<benchmark>.jsonl   resumable completion cache
    <output>/runs/<run name>/scores.parquet                            scored predictions (eval_report rows)
    <output>/runs/<run name>/grounding_inputs.parquet                  completions, reference boxes, box H
    <output>/runs/<run name>/run.json, quarantine.parquet              settings; items that could not be read
    <output>/report.md, report.csv, report.json                        every run in the folder, paper layouts
    <output>/grounding/...                                             Figures 4 and 5 (with grounding analysis)

Several models evaluated into the same folder appear side by side in the report (a baseline and its
post-trained version, for instance), and the grounding analysis compares them.

Completions are cached as they arrive (one JSONL line per answer, flushed at once), under a key of
everything that shapes them: model, adapter, backend and, for APIs, the endpoint (provider and base
URL), output format, model family and sampling settings. All uncached prompts go to the backend in
one call (vLLM schedules them itself; transformers batches them; the API backend sends them
concurrently), so an interrupted run loses at most the answers still in flight. Failed requests are
not cached: a rerun asks them again.

A rerun under the same run name merges into ``runs/<run name>/``: the items it evaluated replace
their earlier rows, and the rows of other benchmarks (or of items outside ``--limit``) stay.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, get_args

import polars as pl
from pydantic import BaseModel, Field, field_validator
from tqdm.auto import tqdm

from data_contracts.eval_items import EvalItems
from data_contracts.eval_report import EvalReport
from data_contracts.quarantine import QuarantineLog
from data_contracts.validation import polars_schema
from training.eval.backends import (
    Generation,
    GenerationRequest,
    GenerationSettings,
    TransformersBackend,
    build_backend,
    endpoint_of,
)
from training.eval.benchmarks import BenchmarkSources, limit_items, load_benchmarks, normalize_benchmark_names
from training.eval.grounding_analysis import GroundingResult, analyse_grounding, box_table
from training.eval.predictions import CachedPrediction, PredictionCache, RunKey, slug
from training.eval.reports import Report, build_report, write_report
from training.eval.scoring import OUTPUT_FORMATS, output_format_for, score_prediction
from training.prompts import build_messages

logger = logging.getLogger(__name__)

GROUNDING_INPUT_SCHEMA = {
    "run_name": pl.String(),
    "item_id": pl.String(),
    "benchmark": pl.String(),
    "prompt_format": pl.String(),
    "family": pl.String(),
    "completion": pl.String(),
    "score": pl.Float64(),
    "image_width": pl.Int64(),
    "image_height": pl.Int64(),
    "reference_boxes": polars_schema(EvalItems)["reference_boxes"],
    "box_uncertainties": pl.List(pl.Float64()),
}


class EvalRunSettings(BaseModel):
    """What one evaluation run evaluates and how it reads the answers (also fields of the ``eval_report`` config)."""

    model: str | None = Field(
        default=None, description="Model folder or name (the API model name for the openai backend)."
    )
    adapter: str | None = Field(default=None, description="LoRA adapter folder.")
    backend: Literal["transformers", "vllm", "openai"] = Field(
        default="transformers", description="transformers, vllm or openai."
    )
    run_name: str | None = Field(
        default=None,
        description="Name of the run in the reports; from the model and adapter names when empty.",
    )
    prompt_format: Literal["auto", "spatialcore", "spatialthinker"] = Field(
        default="auto",
        description="spatialcore, spatialthinker, or auto (SpatialCORE for Qwen3-VL, SpatialThinker otherwise); "
        "numeric items always use dge.",
    )
    family: str | None = Field(
        default=None,
        description="Box-convention family; read from the model's config when empty (qwen2_vl, the 0..1000 "
        "grid, for API models).",
    )
    limit: int | None = Field(default=None, description="Only the first N questions of each benchmark.")
    grounding_analysis: bool = Field(
        default=False, description="Run the entropy scoring pass and write Figures 4 and 5."
    )


PROMPT_FORMAT_CHOICES = get_args(EvalRunSettings.model_fields["prompt_format"].annotation)


class EvalRunConfig(EvalRunSettings):
    """Everything one evaluation run needs: the run settings, the benchmarks, decoding and where to write.

    ``backend_options`` are extra keyword arguments of the backend (device, dtype, adapter_mode,
    base_url, api_key_env, ...).
    """

    model: str = Field(description="Model folder or name (the API model name for the openai backend).")
    benchmarks: list[str] = Field(
        default_factory=lambda: ["omnispatial"],
        description="Benchmark names (see training.eval.benchmarks.BENCHMARK_NAMES) or aliases.",
    )
    output_dir: str = Field(default="eval_results", description="Output folder.")
    generation: GenerationSettings = Field(default_factory=GenerationSettings)
    sources: BenchmarkSources = Field(default_factory=BenchmarkSources)
    backend_options: dict[str, Any] = Field(default_factory=dict)

    @field_validator("benchmarks")
    @classmethod
    def _known_benchmarks(cls, value: list[str]) -> list[str]:
        names = normalize_benchmark_names(list(value))
        if not names:
            raise ValueError("no benchmark selected")
        return names

    def resolved_run_name(self) -> str:
        """The run's name: given, or ``<model>`` / ``<model>+<adapter>``."""
        if self.run_name:
            return self.run_name
        name = slug(Path(self.model).name or self.model)
        return f"{name}+{slug(Path(self.adapter).name)}" if self.adapter else name


@dataclass
class EvalRunResult:
    """What a run produced."""

    run_name: str
    scores: pl.DataFrame
    quarantine: pl.DataFrame
    report: Report
    report_paths: dict[str, Path]
    grounding: GroundingResult | None
    output_dir: Path


def resolve_family(config: EvalRunConfig) -> str:
    """The model family: configured, read from the model's config, or ``qwen2_vl`` for API models."""
    if config.family:
        return config.family
    if config.backend == "openai":
        return "qwen2_vl"
    from training.models import detect_family

    check_model_location(config)
    return detect_family(config.model)


def check_model_location(config: EvalRunConfig) -> None:
    """Raise `ModelLocationError` (one line) when a local backend's model is neither a folder nor cached.

    Without it, a missing folder such as `outputs/tiny-qwen3-vl` is taken for a Hub id, retried five
    times and ends in a traceback. Checked only when the model is needed: a run answered from the
    cache loads no model.
    """
    if config.backend not in ("transformers", "vllm"):
        return
    from training.requirements import ModelLocationError, model_problem

    problem = model_problem(config.model)
    if problem is not None:
        raise ModelLocationError(problem)


def resolve_prompt_format(config: EvalRunConfig, family: str) -> str:
    """``auto`` -> ``spatialcore`` for Qwen3-VL (thinking template), ``spatialthinker`` otherwise."""
    if config.prompt_format != "auto":
        return config.prompt_format
    return "spatialcore" if family == "qwen3_vl" else "spatialthinker"


def run_endpoint(config: EvalRunConfig) -> str | None:
    """The API endpoint of an ``openai``-backend run (provider and base URL); ``None`` for local backends."""
    if config.backend != "openai":
        return None
    return endpoint_of(
        config.backend_options.get("provider", "openai"), config.backend_options.get("base_url")
    )


def build_request(item: dict, prompt_format: str, family: str) -> GenerationRequest:
    """The generation request of one item: its prompt in the item's output format, and its images."""
    messages = build_messages(output_format_for(item, prompt_format), item, family)
    return GenerationRequest(request_id=item["item_id"], messages=messages, images=list(item["images"]))


class LazyBackend:
    """Builds the backend on first use, so a run answered entirely from the cache loads no model."""

    def __init__(self, config: EvalRunConfig, family: str):
        self.config, self.family, self.backend = config, family, None

    def get(self):
        """The backend (built now if needed)."""
        if self.backend is None:
            check_model_location(self.config)
            options = dict(self.config.backend_options)
            options.setdefault("settings", self.config.generation)
            options.setdefault("family", self.family)
            if self.config.backend == "vllm" and self.config.adapter:
                options.setdefault(
                    "merged_dir",
                    str(Path(self.config.output_dir) / "merged" / slug(self.config.resolved_run_name())),
                )
            self.backend = build_backend(
                self.config.backend, self.config.model, self.config.adapter, **options
            )
        return self.backend

    def close(self) -> None:
        """Release the backend."""
        if self.backend is not None:
            self.backend.close()
            self.backend = None


def generate_with_cache(
    items: pl.DataFrame,
    requests: list[GenerationRequest],
    cache: PredictionCache,
    backend: LazyBackend,
) -> dict[str, Generation]:
    """Completions of every item: cached ones as they are, the rest from one backend call, each cached on arrival.

    Every uncached prompt goes to the backend in one ``generate`` call (the backend batches or
    schedules them itself), and each answer is appended to the prediction cache the moment the
    backend reports it, so an interrupted run keeps every answer it already received (and paid for).
    Failed requests (no text) are not cached: the next run asks them again.
    """
    results: dict[str, Generation] = {}
    pending: list[tuple[dict, GenerationRequest]] = []
    for item, request in zip(items.iter_rows(named=True), requests, strict=True):
        cached = cache.get(item["benchmark"], item["item_id"], request.prompt_hash)
        if cached is not None:
            results[item["item_id"]] = Generation(
                cached.completion, cached.finish_reason, cached.completion_tokens
            )
        else:
            pending.append((item, request))
    if not pending:
        return results
    logger.info(
        "%d of %d items answered from the cache; generating %d", len(results), items.height, len(pending)
    )
    with tqdm(total=len(pending), desc="generating") as progress:

        def record(position: int, generation: Generation) -> None:
            item, request = pending[position]
            results[item["item_id"]] = generation
            if generation.text is not None:
                cache.add(
                    item["benchmark"],
                    [
                        CachedPrediction(
                            item["item_id"],
                            request.prompt_hash,
                            generation.text,
                            generation.finish_reason,
                            generation.completion_tokens,
                        )
                    ],
                )
            else:
                logger.warning("no completion for %s: %s", item["item_id"], generation.error)
            progress.update(1)

        generations = backend.get().generate([request for _, request in pending], on_result=record)
    for (item, _), generation in zip(pending, generations, strict=True):
        results.setdefault(item["item_id"], generation)
    return results


def score_items(
    items: pl.DataFrame,
    generations: dict[str, Generation],
    *,
    run_name: str,
    config: EvalRunConfig,
    prompt_format: str,
    family: str,
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Scored predictions (``eval_report`` rows) and the grounding inputs of every item."""
    rows, grounding_rows = [], []
    for item in items.iter_rows(named=True):
        generation = generations.get(item["item_id"], Generation(None, "error", None, "not generated"))
        scored = score_prediction(item, generation.text, prompt_format, generation.finish_reason)
        item_format = output_format_for(item, prompt_format)
        gold = item["answer"]
        rows.append(
            {
                "run_name": run_name,
                "benchmark": item["benchmark"],
                "item_id": item["item_id"],
                "model": config.model,
                "adapter": config.adapter,
                "backend": config.backend,
                "prompt_format": item_format,
                "category": item["category"],
                "task_type": item["task_type"],
                "source": item["source"],
                "question_key": item["question_key"],
                "flipped": item["flipped"],
                "circular_index": item["circular_index"],
                "answer_format": item["answer_format"],
                "gold": gold,
                "completion": generation.text,
                "finish_reason": generation.finish_reason,
                "predicted": scored.predicted,
                "status": scored.status,
                "score": scored.score,
            }
        )
        grounding_rows.append(
            {
                "run_name": run_name,
                "item_id": item["item_id"],
                "benchmark": item["benchmark"],
                "prompt_format": item_format,
                "family": family,
                "completion": generation.text,
                "score": scored.score,
                "image_width": item["image_width"],
                "image_height": item["image_height"],
                "reference_boxes": item["reference_boxes"],
                "box_uncertainties": None,
            }
        )
    scores = pl.DataFrame(
        rows,
        schema={
            name: dtype
            for name, dtype in polars_schema(EvalReport).items()
            if name not in ("n_boxes", "box_uncertainty", "matched_iou")
        },
    )
    return scores, pl.DataFrame(grounding_rows, schema=GROUNDING_INPUT_SCHEMA)


def add_box_columns(scores: pl.DataFrame, grounding_inputs: pl.DataFrame) -> pl.DataFrame:
    """``n_boxes``, mean ``box_uncertainty`` and mean ``matched_iou`` per prediction, from its boxes."""
    boxes = box_table(grounding_inputs)
    per_item = boxes.group_by("run_name", "item_id").agg(
        pl.len().cast(pl.Int64).alias("n_boxes"),
        pl.col("uncertainty").filter(pl.col("uncertainty").is_not_nan()).mean().alias("box_uncertainty"),
        pl.col("matched_iou").mean().alias("matched_iou"),
    )
    joined = scores.join(per_item, on=["run_name", "item_id"], how="left").with_columns(
        pl.col("n_boxes").fill_null(0)
    )
    return joined.select(list(polars_schema(EvalReport))).cast(polars_schema(EvalReport))


def attach_box_entropies(
    grounding_inputs: pl.DataFrame, requests: dict[str, GenerationRequest], backend: TransformersBackend
) -> pl.DataFrame:
    """Fill ``box_uncertainties`` from one scoring pass of the model over the completions that drew boxes."""
    candidates = grounding_inputs.filter(
        pl.col("completion").is_not_null() & (pl.col("prompt_format") == "spatialcore")
    )
    if candidates.height == 0:
        return grounding_inputs
    ids = candidates["item_id"].to_list()
    values = backend.box_entropies([requests[item_id] for item_id in ids], candidates["completion"].to_list())
    mapping = pl.DataFrame(
        {"item_id": ids, "_h": values}, schema={"item_id": pl.String, "_h": pl.List(pl.Float64)}
    )
    return (
        grounding_inputs.join(mapping, on="item_id", how="left", maintain_order="left")
        .with_columns(pl.coalesce("_h", "box_uncertainties").alias("box_uncertainties"))
        .drop("_h")
    )


def merge_run_table(path: Path, fresh: pl.DataFrame, keys: list[str]) -> pl.DataFrame:
    """``fresh`` rows plus the rows of an earlier table at ``path`` that ``fresh`` does not replace.

    Rows are matched on ``keys``: an item evaluated again replaces its earlier row; rows of other
    items and benchmarks stay. Never erases: without an earlier table, ``fresh`` is returned as is.
    """
    if not path.is_file():
        return fresh
    earlier = pl.read_parquet(path)
    if earlier.height == 0 or not all(key in earlier.columns for key in keys):
        return fresh
    kept = earlier.join(fresh.select(keys).unique(), on=keys, how="anti")
    if kept.height == 0:
        return fresh
    return pl.concat([kept, fresh], how="diagonal_relaxed").select(fresh.columns).cast(fresh.schema)


def _merged_meta(path: Path, meta: dict[str, Any], scores: pl.DataFrame) -> dict[str, Any]:
    """``run.json`` of a merged run: the new settings, every benchmark present, the merged item count."""
    if path.is_file():
        earlier = json.loads(path.read_text(encoding="utf-8"))
        changed = [
            key
            for key in ("model", "adapter", "backend", "prompt_format", "family", "generation", "endpoint")
            if earlier.get(key) != meta.get(key)
        ]
        if changed:
            logger.warning(
                "run %s: %s differ from the earlier run of this name; the rows of benchmarks not evaluated "
                "now keep their earlier settings (use another --run-name to keep them apart)",
                meta["run_name"],
                ", ".join(changed),
            )
    merged = dict(meta)
    merged["benchmarks"] = sorted(scores["benchmark"].unique().to_list())
    merged["items"] = scores.height
    merged["evaluated_now"] = list(meta["benchmarks"])
    return merged


def collect_runs(output_dir: Path, file_name: str) -> pl.DataFrame | None:
    """Concatenate ``runs/*/<file_name>`` of an output folder (every run evaluated into it)."""
    files = sorted((output_dir / "runs").glob(f"*/{file_name}"))
    if not files:
        return None
    return pl.concat([pl.read_parquet(file) for file in files], how="diagonal_relaxed")


def run_evaluation(config: EvalRunConfig, items: pl.DataFrame | None = None) -> EvalRunResult:
    """Evaluate one model (and adapter) on the configured benchmarks and write the report of the output folder.

    Args:
        config ([`EvalRunConfig`]): the run.
        items (`pl.DataFrame`, *optional*): ``eval_items`` rows to evaluate (e.g. the Dagster table);
            only the configured benchmarks are kept. When omitted, the benchmarks are loaded from
            ``config.sources``.
    """
    started = time.time()
    output = Path(config.output_dir)
    run_name = config.resolved_run_name()
    family = resolve_family(config)
    prompt_format = resolve_prompt_format(config, family)
    if prompt_format not in OUTPUT_FORMATS:
        raise ValueError(f"unknown prompt format {prompt_format!r}")
    items, quarantine = _run_items(config, items)
    logger.info(
        "run %s: %d items from %s (%d quarantined)",
        run_name,
        items.height,
        ", ".join(config.benchmarks),
        len(quarantine),
    )

    requests = [build_request(item, prompt_format, family) for item in items.iter_rows(named=True)]
    settings: dict[str, Any] = {
        "backend": config.backend,
        "prompt_format": prompt_format,
        "family": family,
        "max_new_tokens": config.generation.max_new_tokens,
        "temperature": config.generation.temperature,
        "top_p": config.generation.top_p,
        "seed": config.generation.seed,
    }
    endpoint = run_endpoint(config)
    if endpoint is not None:
        settings["endpoint"] = endpoint  # the same model name on another server is another model
    run_key = RunKey(model=config.model, adapter=config.adapter, settings=settings)
    cache = PredictionCache(output / "predictions", run_key)
    cache.write_manifest()
    backend = LazyBackend(config, family)
    try:
        generations = generate_with_cache(items, requests, cache, backend)
        scores, grounding_inputs = score_items(
            items, generations, run_name=run_name, config=config, prompt_format=prompt_format, family=family
        )
        if config.grounding_analysis:
            grounding_inputs = _entropy_pass(config, family, backend, grounding_inputs, requests)
    finally:
        backend.close()
    scores = add_box_columns(scores, grounding_inputs)

    run_folder = output / "runs" / slug(run_name, 120)
    merged_scores, quarantine_frame = _write_run_tables(run_folder, scores, grounding_inputs, quarantine)
    run_meta = {
        "run_name": run_name,
        "model": config.model,
        "adapter": config.adapter,
        "backend": config.backend,
        "prompt_format": prompt_format,
        "family": family,
        "benchmarks": list(config.benchmarks),
        "items": items.height,
        "quarantined": len(quarantine),
        "generation": config.generation.model_dump(),
        "grounding_analysis": config.grounding_analysis,
        "seconds": round(time.time() - started, 2),
        "predictions_cache": str(cache.folder),
        "endpoint": endpoint,
    }
    run_meta = _merged_meta(run_folder / "run.json", run_meta, merged_scores)
    (run_folder / "run.json").write_text(json.dumps(run_meta, indent=2, default=str), encoding="utf-8")

    report, grounding = _report_of_every_run(output, config.grounding_analysis)
    paths = write_report(report, output)
    logger.info("run %s done in %.1f s: %s", run_name, time.time() - started, paths["markdown"])
    return EvalRunResult(run_name, scores, quarantine_frame, report, paths, grounding, output)


def _run_items(config: EvalRunConfig, items: pl.DataFrame | None) -> tuple[pl.DataFrame, QuarantineLog]:
    """The items of the configured benchmarks (given `items`, else loaded from the sources), limited, and their quarantine."""
    if items is None:
        items, quarantine = load_benchmarks(config.benchmarks, config.sources)
    else:
        items, quarantine = (
            items.filter(pl.col("benchmark").is_in(list(config.benchmarks))),
            QuarantineLog("eval_items"),
        )
    return limit_items(items, config.limit), quarantine


def _write_run_tables(
    run_folder: Path, scores: pl.DataFrame, grounding_inputs: pl.DataFrame, quarantine: QuarantineLog
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Merge this run's scores, grounding inputs and quarantine into its folder; returns (all its scores, quarantine)."""
    run_folder.mkdir(parents=True, exist_ok=True)
    merged_scores = merge_run_table(run_folder / "scores.parquet", scores, ["benchmark", "item_id"])
    merged_scores.write_parquet(run_folder / "scores.parquet")
    merge_run_table(
        run_folder / "grounding_inputs.parquet", grounding_inputs, ["benchmark", "item_id"]
    ).write_parquet(run_folder / "grounding_inputs.parquet")
    quarantine_frame = quarantine.to_frame()
    quarantine_keys: list[str] = [
        c for c in ("record_id", "source_file", "reason") if c in quarantine_frame.columns
    ]
    merge_run_table(run_folder / "quarantine.parquet", quarantine_frame, quarantine_keys).write_parquet(
        run_folder / "quarantine.parquet"
    )
    return merged_scores, quarantine_frame


def _report_of_every_run(output: Path, grounding_analysis: bool) -> tuple[Report, GroundingResult | None]:
    """The report over every run of the output folder (and the grounding analysis of their boxes when asked)."""
    all_scores = collect_runs(output, "scores.parquet")
    if all_scores is None:
        raise FileNotFoundError(f"no runs/*/scores.parquet under {output}")
    all_meta = [json.loads(path.read_text()) for path in sorted((output / "runs").glob("*/run.json"))]
    grounding = None
    if grounding_analysis:
        all_inputs = collect_runs(output, "grounding_inputs.parquet")
        if all_inputs is None:
            raise FileNotFoundError(f"no runs/*/grounding_inputs.parquet under {output}")
        grounding = analyse_grounding(all_inputs, output / "grounding")
    return build_report(all_scores, all_meta, grounding.as_json() if grounding else None), grounding


def _entropy_pass(
    config: EvalRunConfig,
    family: str,
    backend: LazyBackend,
    grounding_inputs: pl.DataFrame,
    requests: list[GenerationRequest],
) -> pl.DataFrame:
    """Coordinate-digit entropies from a transformers scoring pass (the generating model when it is one)."""
    if config.backend == "openai":
        logger.warning(
            "the openai backend exposes no full-vocabulary entropies: box uncertainties are left empty"
        )
        return grounding_inputs
    by_id = {request.request_id: request for request in requests}
    if config.backend == "transformers":
        scorer = backend.get()
        return attach_box_entropies(grounding_inputs, by_id, scorer)
    backend.close()
    options = {
        key: value
        for key, value in config.backend_options.items()
        if key in ("device", "dtype", "attn_implementation")
    }
    scorer = TransformersBackend(
        config.model, config.adapter, family=family, settings=config.generation, **options
    )
    try:
        return attach_box_entropies(grounding_inputs, by_id, scorer)
    finally:
        scorer.close()
