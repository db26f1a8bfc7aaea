"""The STVQA data set: quotas, balance, split, stable shuffling (across processes), published STVQA-7K."""

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import polars as pl
import pytest

from assets.stvqa.dataset import (
    StvqaDatasetSettings,
    build_stvqa,
    plan_quotas,
    question_with_options,
    read_published_stvqa,
    shuffle_options,
    split_by_image,
)
from assets.stvqa.generate import QuestionGenerationSettings, generate_candidates
from assets.stvqa.pass_at_2 import run_pass_at_2
from assets.stvqa.vocabulary import CATEGORIES
from data_contracts.stvqa import Stvqa
from data_contracts.validation import check_frame
from tests.stvqa.helpers import png_bytes
from training.rewards.reward_functions import spatialthinker_reward

OTHERS = [category for category in CATEGORIES if category != "relation"]

BUILD_SCRIPT = """
import hashlib, sys
from pathlib import Path
import polars as pl
from readers.scene_graphs import read_visual_genome
from assets.stvqa.dataset import StvqaDatasetSettings, build_stvqa
from assets.stvqa.generate import QuestionGenerationSettings, generate_candidates
from assets.stvqa.geometry import load_geometry
from assets.stvqa.pass_at_2 import run_pass_at_2
root = Path(sys.argv[1])
rows, _ = read_visual_genome(root / "visual_genome")
rows = rows.with_columns(origin=pl.lit("sample_world"))
geometry = load_geometry(root / "truth" / "world.json")
settings = QuestionGenerationSettings(questions_per_image=8)
candidates = generate_candidates(rows, settings, geometry, progress=False).candidates
validated = run_pass_at_2(candidates, rows, None, geometry, progress=False).validated
images = {row["image_id"]: row["image"] for row in rows.iter_rows(named=True)}
frame, _, _ = build_stvqa(validated, images, StvqaDatasetSettings(seed=int(sys.argv[2])))
sys.stdout.write(hashlib.sha256(frame.drop("images").write_json().encode()).hexdigest() + " " + str(frame.height))
"""


class TestQuotas:
    @pytest.mark.parametrize(
        ("available", "target", "expected"),
        [
            # plenty of everything: 50% relation, 8 equal shares
            (
                {"relation": 100, **dict.fromkeys(OTHERS, 20)},
                64,
                {"relation": 32, **dict.fromkeys(OTHERS, 4)},
            ),
            # relation limits the size: 2 x relation
            ({"relation": 8, **dict.fromkeys(OTHERS, 20)}, None, {"relation": 8, **dict.fromkeys(OTHERS, 1)}),
            # a scarce category gives its shortfall to the others (water-filling)
            (
                {"relation": 16, "depth": 0, **{c: 5 for c in OTHERS if c != "depth"}},
                None,
                {
                    "relation": 16,
                    "depth": 0,
                    **{
                        c: 16 // 7 + (1 if i < 16 % 7 else 0)
                        for i, c in enumerate([c for c in OTHERS if c != "depth"])
                    },
                },
            ),
        ],
    )
    def test_plan_quotas(self, available, target, expected):
        assert plan_quotas(available, target_size=target) == expected

    def test_relation_share_is_half_when_supply_allows(self):
        quotas = plan_quotas({"relation": 500, **dict.fromkeys(OTHERS, 100)})
        assert quotas["relation"] == sum(quotas.values()) // 2
        assert len({quotas[c] for c in OTHERS}) == 1


def _validated(rows):
    base = {"shard": "00", "options": ["a", "b"], "answer": "A", "answer_index": 0, "level": "easy"}
    return pl.DataFrame([{**base, **row} for row in rows])


def test_top_rated_first_within_a_category():
    from assets.stvqa.dataset import balance_questions

    rows = [
        {"question_id": f"r{i}", "category": "relation", "rating": i, "image_id": str(i)} for i in range(1, 6)
    ]
    rows += [
        {"question_id": f"d{i}", "category": "depth", "rating": 10 - i, "image_id": str(i)}
        for i in range(1, 4)
    ]
    selected, quotas = balance_questions(_validated(rows))
    assert quotas["relation"] == 3 and quotas["depth"] == 3
    relation = selected.filter(pl.col("category") == "relation")
    assert relation["rating"].to_list() == [5, 4, 3]


def test_split_keeps_images_together_and_is_seeded():
    frame = pl.DataFrame({"image_id": [str(i // 3) for i in range(300)]})
    split = split_by_image(frame, seed=0)
    by_image = split.group_by("image_id").agg(pl.col("split").n_unique().alias("splits"))
    assert by_image["splits"].max() == 1
    assert split.filter(pl.col("split") == "val").height == 30
    assert not split["split"].equals(split_by_image(frame, seed=1)["split"])


def test_shuffle_is_stable_and_tracks_the_gold():
    options = ["left of", "right of", "behind", "on"]
    letters = Counter()
    for index in range(200):
        shuffled, letter = shuffle_options(f"Question {index}?", options, "A", image_id="9", seed=0)
        assert shuffled[ord(letter) - ord("A")] == "left of"
        assert (shuffled, letter) == shuffle_options(f"Question {index}?", options, "A", image_id="9", seed=0)
        letters[letter] += 1
    assert all(count > 25 for count in letters.values())  # the gold is not stuck at A


@pytest.mark.slow
def test_balance_and_split_reproducible_across_processes(small_world):
    """Generation, pass@2, balance, split and shuffle give the same table under different PYTHONHASHSEEDs."""
    outputs = []
    for hash_seed in ("0", "4242"):
        environment = {**os.environ, "PYTHONHASHSEED": hash_seed}
        completed = subprocess.run(
            [sys.executable, "-c", BUILD_SCRIPT, str(small_world), "0"],
            capture_output=True,
            text=True,
            env=environment,
            check=True,
            cwd=Path(__file__).parents[2],
        )
        outputs.append(completed.stdout.split()[-2:])
    assert outputs[0] == outputs[1]
    assert int(outputs[0][1]) > 0


@pytest.fixture(scope="module")
def built(sample_scene_graphs, sample_geometry):
    candidates = generate_candidates(
        sample_scene_graphs,
        QuestionGenerationSettings(questions_per_image=8),
        sample_geometry,
        progress=False,
    ).candidates
    validated = run_pass_at_2(
        candidates, sample_scene_graphs, None, sample_geometry, progress=False
    ).validated
    images = {row["image_id"]: row["image"] for row in sample_scene_graphs.iter_rows(named=True)}
    return validated, images, build_stvqa(validated, images, StvqaDatasetSettings(seed=0))


def test_built_table_follows_the_contract_and_balance(built):
    _, _, (frame, quarantine, report) = built
    assert check_frame(frame, Stvqa).passed and len(quarantine) == 0
    categories = Counter(frame["category"].cast(pl.String).to_list())
    assert categories["relation"] == frame.height // 2 == report["quotas"]["relation"]
    assert set(frame["split"]) == {"train", "val"}
    row = frame.row(0, named=True)
    assert f"Image size: ({row['image_width']} x {row['image_height']})" in row["problem"]
    assert row["problem"].startswith("<image>") and row["problem"].endswith(row["question_with_options"])
    assert row["answer_option_text"] == f"({row['answer']}) {row['answer_text']}"
    assert row["question_with_options"] == question_with_options(row["question_only"], row["options"])


def test_rows_score_with_the_spatialthinker_reward(built):
    """A completion that reproduces a row's GT scene and answers its gold option earns the full reward."""
    _, _, (frame, _, _) = built
    row = next(r for r in frame.iter_rows(named=True) if r["gt_scene"]["objects"])
    width, height = row["image_width"], row["image_height"]
    objects = [
        {
            "id": obj["id"],
            "bbox": [
                obj["bbox_2d"][0] * width / 1000,
                obj["bbox_2d"][1] * height / 1000,
                obj["bbox_2d"][2] * width / 1000,
                obj["bbox_2d"][3] * height / 1000,
            ],
        }
        for obj in row["gt_scene"]["objects"]
    ]
    scene = json.dumps({"objects": objects, "relationships": row["gt_scene"]["relationships"]})
    completion = (
        f"<observe>objects</observe><scene>{scene}</scene><think>reasoning</think>"
        f"<answer>{row['answer_option_text']}</answer>"
    )
    rewards = spatialthinker_reward(
        [completion],
        answer_option_text=[row["answer_option_text"]],
        gt_scene=[row["gt_scene"]],
        image_width=[width],
        image_height=[height],
    )
    assert rewards[0] == pytest.approx(1.0, abs=1e-6)


def _published_row(image_id, letter="B", scene=None, images=True, category="relation", options=None):
    scene = (
        scene
        if scene is not None
        else json.dumps(
            {
                "objects": [
                    {"id": "cup.1", "bbox": [20, 10, 60, 50]},
                    {"id": "table.1", "bbox": [0, 40, 200, 100]},
                ],
                "relationships": [{"subject": "cup.1", "predicate": "on", "object": "table.1"}],
            }
        )
    )
    options = options or ["under", "on"]
    return {
        "image_id": image_id,
        "images": {"bytes": png_bytes(), "path": f"{image_id}.jpg"} if images else None,
        "problem": "<image> ... Image size: (200 x 100)\n\nNow answer the following question:\nQ. Where is the cup?",
        "question_only": "Where is the cup with respect to the table?",
        "question_with_options": "Where is the cup with respect to the table?\nOptions:\n(A) under\n(B) on",
        "options": options,
        "answer": f"<scene>{scene}</scene>\n<answer>{letter}</answer>",
        "answer_only": letter,
        "answer_text": f"<scene>{scene}</scene>\n<answer>on</answer>",
        "answer_option_text": f"<scene>{scene}</scene>\n<answer>(B) on</answer>",
        "category": category,
        "level": "easy",
        "rating": 7,
    }


def test_reads_the_published_stvqa_7k(tmp_path):
    folder = tmp_path / "STVQA-7K" / "data"
    folder.mkdir(parents=True)
    image_type = pl.Struct({"bytes": pl.Binary, "path": pl.String})
    train = [
        _published_row("1"),
        _published_row("2", images=False),
        _published_row("3", letter="D"),
        _published_row("4", scene="{not json"),
        _published_row("5", category="colour"),
    ]
    pl.DataFrame(train, schema_overrides={"images": image_type}).write_parquet(
        folder / "train-00000-of-00001.parquet"
    )
    pl.DataFrame([_published_row("6")], schema_overrides={"images": image_type}).write_parquet(
        folder / "val-00000-of-00001.parquet"
    )
    frame, quarantine, report = read_published_stvqa(tmp_path / "STVQA-7K")

    assert check_frame(frame, Stvqa).passed
    assert frame["image_id"].to_list() == ["1", "6"] and frame["split"].to_list() == ["train", "val"]
    assert frame["origin"].to_list() == ["real", "real"]  # a published data set, never the sample world
    row = frame.row(0, named=True)
    assert (row["answer"], row["answer_text"], row["answer_option_text"]) == ("B", "on", "(B) on")
    assert (row["image_width"], row["image_height"]) == (200, 100)
    assert row["gt_scene"]["objects"][0] == {"id": "cup.1", "bbox_2d": [100, 100, 300, 500]}
    assert row["gt_scene"]["relationships"] == [{"subject": "cup.1", "predicate": "on", "object": "table.1"}]
    reasons = dict(zip(quarantine.to_frame()["record_id"], quarantine.to_frame()["reason"], strict=True))
    assert set(reasons) == {
        "train-00000-of-00001.parquet:1",
        "train-00000-of-00001.parquet:2",
        "train-00000-of-00001.parquet:3",
        "train-00000-of-00001.parquet:4",
    }
    assert "no image bytes" in reasons["train-00000-of-00001.parquet:1"]
    assert "outside the 2 options" in reasons["train-00000-of-00001.parquet:2"]
    assert "not valid JSON" in reasons["train-00000-of-00001.parquet:3"]
    assert "unknown category" in reasons["train-00000-of-00001.parquet:4"]
    assert report["files"] == {"train-00000-of-00001.parquet": 5, "val-00000-of-00001.parquet": 1}


def test_published_path_must_exist(tmp_path):
    with pytest.raises(FileNotFoundError, match="no STVQA-7K Parquet file"):
        read_published_stvqa(tmp_path / "missing")
