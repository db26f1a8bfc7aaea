"""Evaluation assets (group ``eval``): the benchmark items table and the evaluation report.

| asset | contents |
|---|---|
| ``eval_items`` (+ ``eval_items_quarantine``) | every configured benchmark read from its native files into one table; by default the OmniSpatial-like test split and the SpatiaLab-like questions of ``mcq_questions`` (the sample world) |
| ``eval_report`` | the scored predictions of the configured model; the paper tables, per-benchmark accuracies and the grounding plots go into the metadata. Without a configured model it evaluates nothing and shows the published tables and the item counts |

Both are thin wrappers over :mod:`training.eval` (benchmarks, runner, reports). The default build
is offline and fast: no model is configured, so materialising the group only builds the items table.

Each setting is written once, in ``training.eval``: the ``eval_items`` config is a
:class:`~training.eval.benchmarks.BenchmarkLocations`, the ``eval_report`` config is a
:class:`~training.eval.runner.EvalRunSettings` and a :class:`~training.eval.backends.GenerationSettings`;
the configs add only what the assets need besides.
"""

from collections.abc import Iterator
from pathlib import Path
from typing import Literal

import dagster as dg
import polars as pl
from PIL import Image
from pydantic import Field

from assets.previews import gallery, markdown_image
from assets.resources import StorageResource
from assets.tables import (
    contract_check_specs,
    finalize_table,
    json_metadata,
    quarantine_output,
    table_and_quarantine_outs,
    value_counts,
)
from data_contracts import eval_items as eval_items_contract
from data_contracts import eval_report as eval_report_contract
from data_contracts.images import decode_image
from data_contracts.quarantine import QuarantineLog
from training.eval.backends import GenerationSettings
from training.eval.benchmarks import (
    BenchmarkLocations,
    BenchmarkSources,
    attach_reference_boxes,
    eval_items_from_mcq,
    finish_items,
    load_benchmarks,
    make_circular_variants,
    normalize_benchmark_names,
    read_parquet_table,
)
from training.eval.reports import build_paper_tables, table_markdown
from training.eval.runner import EvalRunConfig, EvalRunSettings, run_evaluation

GROUP = "eval"
EVAL_CODE_VERSION = "1"
MCQ_BENCHMARKS = {"omnispatial": ("omnispatial", "sub_task_type"), "spatialab": ("spatialab", "task_type")}


class EvalItemsConfig(dg.Config, BenchmarkLocations):
    """Which benchmarks to read and where their local copies are (empty paths: the defaults)."""

    benchmarks: list[str] = Field(
        default=["omnispatial", "spatialab"],
        description="Benchmarks: omnispatial, spatialab, cvbench, 3dsrbench, blink, stvqa_val, dge_heldout.",
    )


def build_eval_items(
    config: EvalItemsConfig, mcq_questions: pl.DataFrame, storage_root: Path
) -> tuple[pl.DataFrame, QuarantineLog]:
    """The items of the configured benchmarks; OmniSpatial and SpatiaLab come from ``mcq_questions`` unless given paths."""
    names = normalize_benchmark_names(config.benchmarks)
    log = QuarantineLog("eval_items")
    frames = []
    from_files = []
    for name in names:
        if name == "omnispatial" and not config.omnispatial_root:
            rows = mcq_questions.filter((pl.col("source") == "omnispatial") & (pl.col("split") == "test"))
            frames.append(
                finish_items(
                    eval_items_from_mcq(rows, "omnispatial", category_column="sub_task_type").to_dicts(),
                    log,
                    "mcq_questions",
                )
            )
        elif name == "spatialab" and not config.spatialab_path:
            rows = mcq_questions.filter(pl.col("source") == "spatialab")
            frames.append(
                finish_items(
                    eval_items_from_mcq(rows, "spatialab", category_column="task_type").to_dicts(),
                    log,
                    "mcq_questions",
                )
            )
        else:
            from_files.append(name)
    if from_files:
        sources = BenchmarkSources(
            **config.model_dump(exclude={"benchmarks"}),
            storage_root=str(storage_root),
        ).model_copy(update={"circular": False, "pseudo_gt_path": None})  # both added below, to every item
        loaded, loaded_log = load_benchmarks(from_files, sources)
        frames.append(loaded)
        log.extend(loaded_log)
    items = pl.concat(frames) if frames else eval_items_contract.EvalItems.create_empty()
    if config.circular:
        items = make_circular_variants(items)
    if config.pseudo_gt_path:
        items = attach_reference_boxes(items, read_parquet_table(config.pseudo_gt_path))
    return items, log


def _items_preview(frame: pl.DataFrame) -> Image.Image | None:
    images = [decode_image(row["images"][0]) for row in frame.head(3).iter_rows(named=True) if row["images"]]
    return gallery(images) if images else None


@dg.multi_asset(
    outs=table_and_quarantine_outs(
        "eval_items",
        "Benchmark items (question, images, gold answer from the benchmark's own index or letter) of every "
        "configured benchmark, under one contract.",
        EVAL_CODE_VERSION,
        quarantine_description="Benchmark records that could not be read, with the reason and the source file.",
    ),
    ins={"mcq_questions": dg.AssetIn()},
    check_specs=contract_check_specs("eval_items"),
    group_name=GROUP,
)
def eval_items_asset(
    context: dg.AssetExecutionContext,
    config: EvalItemsConfig,
    storage: StorageResource,
    mcq_questions: pl.DataFrame,
) -> Iterator[dg.Output | dg.AssetCheckResult]:
    """Read the configured benchmarks into the ``eval_items`` table."""
    items, log = build_eval_items(config, mcq_questions, storage.path)
    counts = value_counts(items, "benchmark")
    checked = finalize_table(
        items,
        eval_items_contract.EvalItems,
        eval_items_contract.CONTRACT_VERSION,
        asset_key="eval_items",
        quarantine=log,
        record_id_column="item_id",
        preview_columns=["benchmark", "item_id", "question", "options", "answer", "category"],
        preview_image=_items_preview,
        storage_root=storage.path,
        extra_metadata={"items_by_benchmark": json_metadata(counts)},
    )
    context.log.info("eval_items: %s, %d quarantined", counts, len(log))
    yield dg.Output(checked.frame, output_name="eval_items", metadata=checked.metadata)
    yield checked.check
    quarantine, metadata = quarantine_output(log)
    yield dg.Output(quarantine, output_name="eval_items_quarantine", metadata=metadata)


class EvalReportConfig(dg.Config, EvalRunSettings, GenerationSettings):
    """The model to evaluate; without `model` the report asset evaluates nothing (the default, offline build)."""

    benchmarks: list[str] = Field(
        default=[], description="Benchmarks to evaluate; empty: every benchmark in eval_items."
    )
    output_dir: str | None = Field(default=None, description="Output folder; default <storage root>/eval.")
    device: str | None = Field(default=None, description="transformers: device (the GPU when there is one).")
    adapter_mode: Literal["auto", "lora", "merge"] = Field(
        default="auto", description="vllm: lora, merge or auto."
    )
    base_url: str | None = Field(default=None, description="openai: API root (e.g. a vLLM server).")
    api_key_env: str = Field(
        default="OPENAI_API_KEY", description="openai: environment variable holding the key."
    )


def _backend_options(config: EvalReportConfig) -> dict:
    if config.backend == "transformers":
        return {"device": config.device} if config.device else {}
    if config.backend == "vllm":
        return {"adapter_mode": config.adapter_mode}
    return {
        key: value
        for key, value in {"base_url": config.base_url, "api_key_env": config.api_key_env}.items()
        if value
    }


def _plot_metadata(paths: dict) -> dict:
    metadata = {}
    for name, path in paths.items():
        with Image.open(path) as image:
            metadata[name] = dg.MetadataValue.md(markdown_image(image.convert("RGB"), alt=name))
    return metadata


@dg.multi_asset(
    name="eval_report_asset",
    outs={
        "eval_report": dg.AssetOut(
            description="Scored predictions of the configured model on `eval_items`, with the paper tables and "
            "plots in the metadata.",
            code_version=EVAL_CODE_VERSION,
        )
    },
    ins={"eval_items": dg.AssetIn()},
    check_specs=contract_check_specs("eval_report"),
    group_name=GROUP,
)
def eval_report(
    context: dg.AssetExecutionContext,
    config: EvalReportConfig,
    storage: StorageResource,
    eval_items: pl.DataFrame,
) -> Iterator[dg.Output | dg.AssetCheckResult]:
    """Scored predictions of the configured model on `eval_items`, with the paper tables and plots in the metadata."""
    counts = value_counts(eval_items, "benchmark")
    if not config.model:
        tables = build_paper_tables(eval_report_contract.EvalReport.create_empty(), include_empty=True)
        checked = finalize_table(
            eval_report_contract.EvalReport.create_empty(),
            eval_report_contract.EvalReport,
            eval_report_contract.CONTRACT_VERSION,
            asset_key="eval_report",
            extra_metadata={
                "model": "none configured: set the model in the run config to evaluate",
                "items_by_benchmark": json_metadata(counts),
                "published_tables": dg.MetadataValue.md(
                    "\n\n".join(table_markdown(table) for table in tables)
                ),
            },
        )
        context.log.info("eval_report: no model configured; %d items ready", eval_items.height)
        yield dg.Output(checked.frame, output_name="eval_report", metadata=checked.metadata)
        yield checked.check
        return
    benchmarks = config.benchmarks or sorted(counts)
    run_config = EvalRunConfig(
        **config.model_dump(include=set(EvalRunSettings.model_fields)),
        benchmarks=benchmarks,
        output_dir=config.output_dir or str(storage.path / "eval"),
        generation=GenerationSettings(**config.model_dump(include=set(GenerationSettings.model_fields))),
        backend_options=_backend_options(config),
    )
    result = run_evaluation(run_config, items=eval_items)
    accuracies = {
        benchmark: values["all_variants"]
        for benchmark, values in result.report.benchmarks.get(result.run_name, {}).items()
    }
    extra = {
        "run_name": result.run_name,
        "model": config.model,
        "adapter": config.adapter or "none",
        "accuracy_by_benchmark": json_metadata(accuracies),
        "paper_tables": dg.MetadataValue.md(
            "\n\n".join(table_markdown(table) for table in result.report.tables)
        ),
        "report_path": dg.MetadataValue.path(str(result.report_paths["markdown"])),
    }
    if result.grounding is not None:
        extra["grounding"] = dg.MetadataValue.md(result.grounding.markdown())
        extra.update(_plot_metadata(result.grounding.plots))
    rejected = QuarantineLog("eval_report")
    checked = finalize_table(
        result.scores,
        eval_report_contract.EvalReport,
        eval_report_contract.CONTRACT_VERSION,
        asset_key="eval_report",
        quarantine=rejected,
        record_id_column="item_id",
        preview_columns=["run_name", "benchmark", "item_id", "predicted", "gold", "status", "score"],
        extra_metadata=extra,
    )
    if rejected:
        context.log.warning(
            "eval_report: %d scored rows broke the contract: %s", len(rejected), rejected.reason_counts()
        )
    context.log.info("eval_report: %s on %d items", result.run_name, checked.frame.height)
    yield dg.Output(checked.frame, output_name="eval_report", metadata=checked.metadata)
    yield checked.check


EVAL_ASSETS = [eval_items_asset, eval_report]
