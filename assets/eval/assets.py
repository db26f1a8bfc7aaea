"""Evaluation assets (group ``eval``): the benchmark items table and the evaluation report.

| asset | contents |
|---|---|
| ``eval_items`` (+ ``eval_items_quarantine``) | every configured benchmark read from its native files into one table; by default the OmniSpatial-like test split and the SpatiaLab-like questions of ``mcq_questions`` (the sample world) |
| ``eval_report`` | the scored predictions of the configured model; the paper tables, per-benchmark accuracies and the grounding plots go into the metadata. Without a configured model it evaluates nothing and shows the published tables and the item counts |

Which items of each benchmark ``eval_items`` reads:

| benchmark | items |
|---|---|
| ``omnispatial`` | without a location, the ``test`` split of ``mcq_questions``' OmniSpatial rows (the ``sources`` resource's ``omnispatial_split``: by default ``hash``, a stable hash of the image id puts ``omnispatial_test_fraction`` of the images in ``test``); with a location, ``omnispatial_split`` of that folder (default all) |
| ``spatialab`` | every SpatiaLab question (``mcq_questions``' rows, or the location's file) |
| ``cvbench``, ``3dsrbench`` | every row of the given files (CV-Bench's ``test`` files) |
| ``blink`` | the ``val`` split of ``blink_subsets`` (the test split hides its answers) |
| ``stvqa_val`` | the ``stvqa`` table's ``stvqa_split`` (default ``val``) |
| ``dge_heldout`` | the ``dge_tasks`` table's ``dge_split`` (default ``test``) |

A requested benchmark that yields no item fails the asset with the reason (:class:`EmptyBenchmarkError`), rather
than evaluating nothing: a small OmniSpatial set whose every image hashes into ``train`` names its split counts.

Both are thin wrappers over :mod:`training.eval` (benchmarks, runner, reports). The default build
is offline and fast: no model is configured, so materialising the group only builds the items table.

Each setting is written once, in ``training.eval``, and the run configs follow ``spatial-eval``'s flags:
the ``eval_items`` config names its benchmarks as ``--benchmarks`` does (``cvbench`` or
``cvbench=LOCATION``, the location a local path or ``hf://datasets/...``) beside the other fields of
:class:`~training.eval.benchmarks.BenchmarkLocations`; the ``eval_report`` config is a
:class:`~training.eval.runner.EvalRunSettings` with the decoding settings in one ``generation`` group
(a :class:`~training.eval.backends.GenerationSettings`) and the backend's own options in one
``backend_options`` mapping (``device``, ``adapter_mode``, ``base_url``, ...), as
:class:`~training.eval.runner.EvalRunConfig` has them.
"""

from collections.abc import Iterator
from pathlib import Path
from typing import Any, Self

import dagster as dg
import polars as pl
from PIL import Image
from pydantic import Field, model_validator

from assets.partition_ranges import TableFile
from assets.previews import gallery, markdown_image
from assets.resources import StorageResource
from assets.tables import (
    EMPTY_REASON_KEY,
    contract_check_specs,
    finalize_table,
    json_metadata,
    quarantine_output,
    table_and_quarantine_outs,
    value_counts,
)
from data_contracts import eval_items as eval_items_contract
from data_contracts import eval_report as eval_report_contract
from data_contracts.image_store import embed_images
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
    read_parquet_table,
    split_benchmark_locations,
)
from training.eval.reports import build_paper_tables, table_markdown
from training.eval.runner import EvalRunConfig, EvalRunSettings, run_evaluation

GROUP = "eval"
EVAL_CODE_VERSION = "1"
MCQ_BENCHMARKS = {"omnispatial": ("omnispatial", "sub_task_type"), "spatialab": ("spatialab", "task_type")}


_LOCATIONS = BenchmarkLocations.model_fields


def _location_field(name: str) -> Any:
    """The ``eval_items`` field of a :class:`BenchmarkLocations` field that is not a benchmark's location."""
    field = _LOCATIONS[name]
    if field.default_factory is not None:
        return Field(default_factory=field.default_factory, description=field.description)
    return Field(default=field.default, description=field.description)


class EvalItemsConfig(dg.Config):
    """Which benchmarks to read and where their copies are (no location: the defaults).

    The benchmark locations (:data:`~training.eval.benchmarks.BENCHMARK_LOCATION_FIELDS`) are given in the
    ``benchmarks`` entries; the other fields are :class:`BenchmarkLocations`' own.

    >>> sorted(EvalItemsConfig.model_fields)
    ['benchmarks', 'blink_subsets', 'circular', 'dge_split', 'omnispatial_split', 'pseudo_gt_path', 'spatialab_images_dir', 'stvqa_split']
    """

    benchmarks: list[str] = Field(
        default=["omnispatial", "spatialab"],
        description="Benchmarks to read, each a name or NAME=LOCATION (a local path or "
        "hf://datasets/OWNER/NAME[@REVISION][/PATH]), as spatial-eval's --benchmarks: omnispatial, spatialab, "
        "cvbench, 3dsrbench, blink, stvqa_val, dge_heldout. Without a location, omnispatial and spatialab come "
        "from mcq_questions (the sample world), stvqa_val and dge_heldout from the storage root's tables.",
    )
    omnispatial_split: str | None = _location_field("omnispatial_split")
    spatialab_images_dir: str | None = _location_field("spatialab_images_dir")
    blink_subsets: list[str] = _location_field("blink_subsets")
    stvqa_split: str = _location_field("stvqa_split")
    dge_split: str = _location_field("dge_split")
    pseudo_gt_path: str | None = _location_field("pseudo_gt_path")
    circular: bool = _location_field("circular")


class EmptyBenchmarkError(ValueError):
    """A requested benchmark yields no item; the message names it and says why."""


def _empty_reason(
    name: str, locations: dict[str, str], mcq_questions: pl.DataFrame, log: QuarantineLog
) -> str:
    """Why a requested benchmark has no item (one sentence)."""
    if name in MCQ_BENCHMARKS and name not in locations:
        source = MCQ_BENCHMARKS[name][0]
        rows = mcq_questions.filter(pl.col("source") == source)
        if rows.height == 0:
            return f"{name}: mcq_questions has no {source} question"
        splits = dict(sorted(rows.group_by("split").len().iter_rows()))
        return (
            f"{name}: mcq_questions has {rows.height} {source} questions, none in the test split (splits: {splits}); "
            "its split is a stable hash of the image id (the sources resource's omnispatial_split 'hash' and "
            "omnispatial_test_fraction): set omnispatial_split to 'test' or give the benchmark a location"
        )
    where = locations.get(name, "its default location")
    quarantined = f", {len(log)} records quarantined (eval_items_quarantine)" if len(log) else ""
    return f"{name}: no item read from {where}{quarantined}"


def build_eval_items(
    config: EvalItemsConfig, mcq_questions: pl.DataFrame, storage_root: Path, mcq_images: Path | None = None
) -> tuple[pl.DataFrame, QuarantineLog]:
    """The items of the configured benchmarks; OmniSpatial and SpatiaLab come from ``mcq_questions`` unless given a
    location, their images embedded from ``mcq_images`` (the table's image file) when the questions name them by
    hash only. Raises :class:`EmptyBenchmarkError` when a requested benchmark yields no item."""

    def with_images(rows: pl.DataFrame) -> pl.DataFrame:
        return rows if "image" in rows.columns or mcq_images is None else embed_images(rows, mcq_images)

    names, locations = split_benchmark_locations(config.benchmarks)
    log = QuarantineLog("eval_items")
    frames = []
    from_files = []
    for name in names:
        if name == "omnispatial" and "omnispatial" not in locations:
            rows = with_images(
                mcq_questions.filter((pl.col("source") == "omnispatial") & (pl.col("split") == "test"))
            )
            frames.append(
                finish_items(
                    eval_items_from_mcq(rows, "omnispatial", category_column="sub_task_type").to_dicts(),
                    log,
                    "mcq_questions",
                )
            )
        elif name == "spatialab" and "spatialab" not in locations:
            rows = with_images(mcq_questions.filter(pl.col("source") == "spatialab"))
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
        sources = (
            BenchmarkSources(**config.model_dump(exclude={"benchmarks"}), storage_root=str(storage_root))
            .with_locations(locations)
            .model_copy(update={"circular": False, "pseudo_gt_path": None})  # both added below, to every item
        )
        loaded, loaded_log = load_benchmarks(from_files, sources)
        frames.append(loaded)
        log.extend(loaded_log)
    items = pl.concat(frames) if frames else eval_items_contract.EvalItems.create_empty()
    found = set(items["benchmark"].unique().to_list())
    empty = [name for name in names if name not in found]
    if empty:
        raise EmptyBenchmarkError(
            "requested benchmarks without items: "
            + "; ".join(_empty_reason(name, locations, mcq_questions, log) for name in empty)
        )
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
    ins={"mcq_questions": dg.AssetIn(), "mcq_images": dg.AssetIn()},
    check_specs=contract_check_specs("eval_items"),
    group_name=GROUP,
)
def eval_items_asset(
    context: dg.AssetExecutionContext,
    config: EvalItemsConfig,
    storage: StorageResource,
    mcq_questions: pl.DataFrame,
    mcq_images: TableFile,
) -> Iterator[dg.Output | dg.AssetCheckResult]:
    """Read the configured benchmarks into the ``eval_items`` table (a requested benchmark without items fails)."""
    try:
        items, log = build_eval_items(config, mcq_questions, storage.path, mcq_images)
    except EmptyBenchmarkError as error:
        raise dg.Failure(description=str(error)) from error
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


BACKEND_OPTION_NAMES = {
    "transformers": ("device", "dtype", "attn_implementation"),
    "vllm": ("adapter_mode", "tensor_parallel_size", "gpu_memory_utilization", "max_model_len"),
    "openai": ("base_url", "api_key_env", "provider", "max_concurrency"),
}
"""The options each backend takes in ``backend_options`` (``spatial-eval``'s backend flags)."""


class GenerationConfig(dg.Config, GenerationSettings):
    """The decoding settings of the ``eval_report`` run (:class:`~training.eval.backends.GenerationSettings`)."""


class EvalReportConfig(dg.Config, EvalRunSettings):
    """The model to evaluate; without `model` the report asset evaluates nothing (the default, offline build).

    The decoding settings are one group, ``generation``, as in :class:`~training.eval.runner.EvalRunConfig`.
    """

    benchmarks: list[str] = Field(
        default=[], description="Benchmarks to evaluate; empty: every benchmark in eval_items."
    )
    output_dir: str | None = Field(default=None, description="Output folder; default <storage root>/eval.")
    generation: GenerationConfig = Field(
        default_factory=GenerationConfig,
        description="Decoding: max_new_tokens, temperature, top_p, batch_size, seed (spatial-eval's flags of the "
        "same names).",
    )
    backend_options: dict[str, Any] = Field(
        default_factory=dict,
        description="Options of the backend, as spatial-eval's flags: transformers: device (default the GPU when "
        "there is one), dtype, attn_implementation; vllm: adapter_mode (auto, lora or merge), "
        "tensor_parallel_size, gpu_memory_utilization, max_model_len; openai: base_url (e.g. a vLLM server), "
        "api_key_env (default OPENAI_API_KEY), provider, max_concurrency.",
    )

    @model_validator(mode="after")
    def _known_backend_options(self) -> Self:
        unknown = sorted(set(self.backend_options) - set(BACKEND_OPTION_NAMES[self.backend]))
        if unknown:
            raise ValueError(
                f"backend_options {unknown} are not options of the {self.backend} backend; it takes "
                f"{', '.join(BACKEND_OPTION_NAMES[self.backend])}"
            )
        return self


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
                EMPTY_REASON_KEY: "off until eval_report_asset's model is set",
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
        generation=GenerationSettings(**config.generation.model_dump()),
        backend_options=dict(config.backend_options),
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
