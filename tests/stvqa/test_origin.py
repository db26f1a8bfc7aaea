"""Every STVQA row carries the origin of its scene graph: candidates, validated questions and the table."""

from __future__ import annotations

import polars as pl
import pytest

from assets.stvqa.dataset import StvqaDatasetSettings, build_stvqa
from assets.stvqa.generate import QuestionGenerationSettings, generate_candidates
from assets.stvqa.pass_at_2 import run_pass_at_2
from data_contracts.stvqa import Stvqa
from data_contracts.stvqa_candidates import StvqaCandidates
from data_contracts.stvqa_validated import StvqaValidated
from data_contracts.validation import check_frame
from tests.stvqa.helpers import kitchen_row
from training.data import MixedOriginError, load_training_data


def _build(scene_graphs: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    generation = generate_candidates(
        scene_graphs, QuestionGenerationSettings(questions_per_image=8), None, progress=False
    )
    validated = run_pass_at_2(generation.candidates, scene_graphs, None, None, progress=False).validated
    images = {row["image_id"]: row["image"] for row in scene_graphs.iter_rows(named=True)}
    table, _, _ = build_stvqa(validated, images, StvqaDatasetSettings(seed=0, val_fraction=0.0))
    return generation.candidates, validated, table


@pytest.mark.parametrize("origin", ["real", "sample_world"])
def test_questions_carry_their_scene_graphs_origin(origin):
    scene_graphs = pl.DataFrame(
        [{**kitchen_row("k1"), "origin": origin}, {**kitchen_row("k2"), "origin": origin}]
    )
    candidates, validated, table = _build(scene_graphs)
    assert table.height > 0
    for frame, contract in ((candidates, StvqaCandidates), (validated, StvqaValidated), (table, Stvqa)):
        assert check_frame(frame, contract).passed
        assert frame["origin"].unique().to_list() == [origin]


def test_a_scene_graph_without_origin_is_quarantined_not_guessed():
    row = kitchen_row("k1")
    row["origin"] = None
    generation = generate_candidates(pl.DataFrame([row]), QuestionGenerationSettings(), None, progress=False)
    assert generation.candidates.height == 0
    reasons = generation.quarantine.to_frame()["reason"].to_list()
    assert len(reasons) == 1 and "origin None is not one of sample_world, real" in reasons[0]


def test_the_trainer_refuses_an_stvqa_table_mixing_origins(tmp_path):
    scene_graphs = pl.DataFrame(
        [{**kitchen_row("k1"), "origin": "real"}, {**kitchen_row("k2"), "origin": "sample_world"}]
    )
    _, _, table = _build(scene_graphs)
    expected = {origin: int((table["origin"] == origin).sum()) for origin in ("real", "sample_world")}
    assert expected["real"] > 0 and expected["sample_world"] > 0
    table.write_parquet(tmp_path / "stvqa.parquet")
    with pytest.raises(MixedOriginError, match="table 'stvqa' mixes rows of different origins"):
        load_training_data(tmp_path, "stvqa", "spatialthinker", "qwen2_5_vl")
    allowed = load_training_data(tmp_path, "stvqa", "spatialthinker", "qwen2_5_vl", allow_mixed_origins=True)
    assert allowed.origins == expected
