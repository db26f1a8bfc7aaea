"""The cost table of the paid stages (``spatial-build --estimate-cost``): built from the materialised inputs,
estimated by each stage's LLM resource, without a model call, a server or a key."""

from __future__ import annotations

import polars as pl
import pytest

from assets.grounding.phrases import DEFAULT_SKIP_TASK_TYPES, is_skipped_task
from assets.llm_costs import PAID_STAGES, estimate_costs, format_cost_table
from assets.stvqa.generate import QuestionGenerationSettings, generate_candidates
from data_contracts.storage import table_path
from pipelines.definitions import build_resources
from readers.mcq import read_omnispatial


def test_cost_table_of_the_sample_world(tmp_path, small_world, sample_scene_graphs, sample_geometry):
    questions, _ = read_omnispatial(small_world / "omnispatial", split="train")
    candidates = generate_candidates(
        sample_scene_graphs,
        QuestionGenerationSettings(questions_per_image=3),
        sample_geometry,
        progress=False,
    ).candidates
    questions.write_parquet(table_path(tmp_path, "mcq_questions"))
    sample_scene_graphs.write_parquet(table_path(tmp_path, "scene_graphs"))
    shard = table_path(tmp_path, "stvqa_candidates", "00")
    shard.parent.mkdir(parents=True)
    candidates.write_parquet(shard)  # a partitioned table: one file per shard

    resources = build_resources(str(tmp_path))  # default endpoints and no key: nothing may be called
    rows = {row.stage: row for row in estimate_costs(resources, tmp_path)}
    assert list(rows) == list(PAID_STAGES)
    skipped = sum(
        is_skipped_task(task, sub or "", DEFAULT_SKIP_TASK_TYPES)
        for task, sub in questions.select("task_type", "sub_task_type").iter_rows()
    )
    assert rows["object_phrases"].estimate.requests == questions.height - skipped
    assert rows["stvqa_candidates"].estimate.requests == sample_scene_graphs.height
    assert rows["stvqa_candidates"].estimate.later_requests == sample_scene_graphs.height  # a re-ask of each
    assert rows["stvqa_validated"].estimate.requests == 2 * candidates.height
    assert (
        rows["stvqa_validated"].estimate.later_requests == 2 * candidates.height
    )  # round 2 for every question
    for stage in ("stvqa_candidates", "stvqa_validated"):  # every round, and one re-ask of every answer
        estimate = rows[stage].estimate
        assert estimate.upper_bound_usd == pytest.approx(2 * (estimate.cost_usd + estimate.later_cost_usd))
    assert (
        rows["sft_cold_start"].estimate is None
        and "materialise spatialcore_train" in rows["sft_cold_start"].note
    )
    for stage in ("object_phrases", "stvqa_candidates", "stvqa_validated"):
        estimate = rows[stage].estimate
        assert estimate.cost_usd > 0 and estimate.prompt_tokens > 0 and estimate.cached == 0
    assert rows["stvqa_candidates"].model.startswith("claude") and rows["stvqa_validated"].model == "gpt-4o"

    table = format_cost_table(list(rows.values()))
    lines = table.splitlines()
    assert lines[0].split()[:6] == ["stage", "resource", "model", "mode", "requests", "later"]
    assert lines[-1].startswith("TOTAL")
    total = sum(row.estimate.cost_usd for row in rows.values() if row.estimate is not None)
    at_most = sum(row.estimate.upper_bound_usd for row in rows.values() if row.estimate is not None)
    assert lines[-1].split()[-2:] == [f"{total:.4f}", f"{at_most:.4f}"]

    # The batch price is half; the estimate follows the resource's mode.
    batch_resources = {
        key: value.model_copy(update={"mode": "batch"}) if key.endswith("_llm") else value
        for key, value in resources.items()
    }
    batch_rows = {
        row.stage: row for row in estimate_costs(batch_resources, tmp_path, stages=["stvqa_validated"])
    }
    assert batch_rows["stvqa_validated"].mode == "batch"
    assert batch_rows["stvqa_validated"].estimate.cost_usd == rows["stvqa_validated"].estimate.cost_usd / 2
    assert (
        pl.read_parquet(table_path(tmp_path, "mcq_questions")).height == questions.height
    )  # inputs untouched

    # A model without a price is shown as such, not as $0.
    unpriced = {
        **resources,
        "stvqa_judge_llm": resources["stvqa_judge_llm"].model_copy(update={"model": "gpt-5x"}),
    }
    (row,) = estimate_costs(unpriced, tmp_path, stages=["stvqa_validated"])
    assert not row.estimate.priced and "no price: set price_table" in row.note
    assert "  unpriced     unpriced  " in format_cost_table([row]).splitlines()[1]
