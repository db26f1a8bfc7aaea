"""Golden values: hashes, shards and option orders pinned to literals computed once from the code.

Comparing `f(x) == f(x)` in one process proves determinism within a run, not across releases. These
values must not drift between versions of this code, of Python, numpy or polars: a cache key that
moves re-pays every cached LLM answer, a shard or split that moves rebuilds partitions and leaks
test rows into training, an option order that moves changes every gold letter of a published table.
When one of these tests fails, the change is a data migration: either undo it, or bump the version
that says so (`model_clients.cache.CACHE_KEY_VERSION`, a template version, a contract version) and then
re-derive the literal here, in the same commit, saying why.
"""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from assets.dge.tasks import shuffled_options
from assets.grounding.cold_start import ColdStartSettings, select_rows
from assets.grounding.shards import shard_of as grounding_shard_of
from assets.sample_world.questions import Draft, ask
from assets.stvqa.dataset import balance_questions, shuffle_options, split_by_image
from assets.stvqa.shards import shard_of as stvqa_shard_of
from assets.stvqa.templates import stable_order
from data_contracts.stable_hash import stable_bucket, stable_fraction, stable_int, stable_split
from model_clients import LLMClient, LLMClientConfig, LLMRequest
from model_clients.cache import compute_cache_key
from training.eval.benchmarks import make_circular_variants
from training.sft import build_sft_frame
from training.testing import tiny_training_frames

PHRASES_SCHEMA = {
    "type": "object",
    "required": ["phrases"],
    "properties": {"phrases": {"type": "array", "items": {"type": "string"}}},
}


# -- LLM response cache ------------------------------------------------------------------------------
# A changed key misses every stored answer: the next rebuild re-pays every cached LLM call (phrase
# extraction, STVQA generation, pass@2 answering) and loses answers that cannot be bought twice (a
# sampled pass@k answer is not the same answer again).

CACHE_KEY_CASES = {
    "plain text": (
        LLMRequest("object_phrases", "v1", "Name the objects."),
        ("openai", "gpt-4o-mini", {"temperature": 0.0}, "native"),
        "66aaa8e2b89479adf3caf73685e1bf4f98697ed0f0dd0668d0a998b7f31ba6fe",
    ),
    "schema, system prompt and image": (
        LLMRequest(
            "object_phrases",
            "v2",
            "Is the cup left of the laptop?",
            system="Extract objects.",
            schema=PHRASES_SCHEMA,
            schema_name="phrases",
            images=[b"\x89PNG\r\n\x1a\nfake"],
        ),
        ("anthropic", "claude-sonnet-4-20250514", {"temperature": 0.0, "max_tokens": 512}, "native"),
        "ec6f8db08c04cb04fcf25117239868555a3c5fe2bf3f95a1f4ee57988cff6721",
    ),
    "second pass@k sample in JSON-object mode": (
        LLMRequest("stvqa_answer", "v1", "Q. Where is the cup?\n(A) left\n(B) right", sample_index=1),
        ("openai", "gpt-4o", {"temperature": 1.0, "seed": 7}, "json_object"),
        "73dcff6275d712df3b60719bf60b04549f9dfc6ad6fbe6edbd5aec12e21ed861",
    ),
}


@pytest.mark.parametrize("case", sorted(CACHE_KEY_CASES))
def test_cache_key(case):
    request, (provider, model, parameters, json_mode), expected = CACHE_KEY_CASES[case]
    assert compute_cache_key(provider, model, request, parameters, json_mode) == expected


def test_cache_key_of_a_default_client(tmp_path):
    # Also moves when a client default that enters the key changes (model, temperature, max_tokens,
    # image detail, JSON mode): every cached answer of a default configuration is then paid again.
    config = LLMClientConfig(api_key="sk-golden", cache_path=tmp_path / "responses.sqlite")
    with LLMClient(config) as client:
        key = client.cache_key(LLMRequest("object_phrases", "v1", "Name the objects."))
    assert key == "7dddea2322574c63843a2257e72b9f239410640ca548c409acf2937419fe7afa"


# -- stable hashes, splits and shards ----------------------------------------------------------------
# A moved split sends test scenes into training (evaluation numbers silently inflate) and changes
# every split-dependent table; a moved shard re-runs (and re-pays) every partitioned step, because
# each shard's materialisation no longer matches its rows.


def test_stable_int_and_fraction():
    assert stable_int("scene0000_00", "options") == 241079947067874321
    assert stable_int(0, "img7", "q") == 865046721927604660
    assert stable_fraction("scene0000_00") == 0.7459316090865635


def test_stable_split():
    # readers.mcq (by record id) and the DGE task tables (by scene id) split with this function
    scenes = [f"scene{index:04d}_00" for index in range(20)]
    test_scenes = [scene for scene in scenes if stable_split(scene, 0.1) == "test"]
    assert test_scenes == ["scene0003_00", "scene0018_00"]


def test_stable_bucket():
    assert [stable_bucket(f"q{index}", 16) for index in range(10)] == [6, 5, 6, 12, 15, 12, 12, 12, 7, 1]


def test_grounding_shards():
    # Moving them re-runs phrase extraction (LLM calls) and detection for every shard.
    question_ids = [f"omnispatial/{index}_0" for index in range(8)] + ["spatialab/17"]
    assert [grounding_shard_of(question_id) for question_id in question_ids] == [
        "shard-00",
        "shard-00",
        "shard-07",
        "shard-00",
        "shard-04",
        "shard-07",
        "shard-00",
        "shard-07",
        "shard-07",
    ]


def test_stvqa_shards():
    # Moving them re-runs STVQA generation (Claude) and pass@2 validation (GPT-4o) for every shard.
    assert [stvqa_shard_of(image_id) for image_id in ["1", "7", "2343", "107899"]] == ["14", "08", "26", "22"]


# -- option orders and selections ---------------------------------------------------------------------
# A moved option order changes the gold letter of published rows (a model trained on one release is
# scored against another's letters) and the prompts, hence the cache keys, of every pass@2 answer.


def test_stvqa_option_shuffle():
    assert shuffle_options("Where is the cup?", ["on", "under", "behind"], "A", image_id="7") == (
        ["on", "behind", "under"],
        "A",
    )
    shuffled = shuffle_options(
        "Which is closer to the camera?",
        ["the lamp", "the chair", "the table", "the sofa"],
        "C",
        image_id="2343",
        seed=3,
    )
    assert shuffled == (["the sofa", "the lamp", "the chair", "the table"], "D")


def test_stvqa_template_option_order():
    # The template generator's options (and so the generated questions sent for validation).
    order = stable_order(["left", "right", "above", "below"], 0, "2343", "Where is the cup?", 4)
    assert order == ["left", "above", "below", "right"]


def test_stvqa_balance_and_split():
    # Ties in rating are broken by a seeded hash: a moved tie-break swaps which questions (already paid
    # for) make the published table; a moved split moves images between train and val.
    rows = [
        {
            "question_id": f"q{index:02d}",
            "image_id": str(100 + index // 2),
            "category": category,
            "rating": 9 if index % 3 == 0 else 8,
        }
        for index, category in enumerate(["relation"] * 6 + ["depth"] * 3 + ["count"] * 3)
    ]
    selected, quotas = balance_questions(pl.DataFrame(rows), 0.5, 6, seed=0)
    assert selected["question_id"].to_list() == ["q03", "q00", "q01", "q06", "q07", "q09"]
    assert {category: quota for category, quota in quotas.items() if quota} == {
        "relation": 3,
        "depth": 2,
        "count": 1,
    }
    frame = pl.DataFrame({"image_id": [str(index // 2) for index in range(40)]})
    val = split_by_image(frame, 0.1, seed=0).filter(pl.col("split") == "val")
    assert sorted(set(val["image_id"].to_list())) == ["1", "6"]


def test_dge_option_shuffle():
    assert shuffled_options(
        "scene0000_00/relative_direction/b633ec566f", ["front-left", "front-right", "back-left", "back-right"]
    ) == ["front-right", "back-left", "front-left", "back-right"]
    assert shuffled_options("scene0001_00/object_count/0123456789", ["2", "3", "4", "5"]) == [
        "5",
        "4",
        "3",
        "2",
    ]


def test_sample_world_options():
    # The sample world draws each image's options from numpy's PCG64 seeded like this
    # (assets.sample_world.generator); a moved draw changes every sample-world question and answer.
    draft = Draft(
        "closest_to_camera",
        "Which object is closest to the camera?",
        "the red chair",
        ("the lamp", "the table", "the sofa", "the plant", "the box"),
        (1,),
    )
    rng = np.random.default_rng(np.random.SeedSequence([0, 0, 2]))
    question = ask(draft, "Perspective_Taking", "Egocentric", 4, rng)
    assert question.options == ["the red chair", "the sofa", "the table", "the lamp"]
    assert question.answer_index == 0


def test_eval_circular_variants():
    # Rotations, not shuffles; a change re-scores every benchmark and breaks comparisons with old runs.
    items = pl.DataFrame(
        {
            "benchmark": ["b"],
            "item_id": ["q"],
            "question_key": ["q"],
            "options": [["x", "y", "z"]],
            "answer_index": [2],
            "answer": ["C"],
            "answer_format": ["choice"],
            "circular_index": [0],
        }
    )
    assert make_circular_variants(items).select("item_id", "options", "answer").rows() == [
        ("q", ["x", "y", "z"], "C"),
        ("q#circular1", ["y", "z", "x"], "B"),
        ("q#circular2", ["z", "x", "y"], "A"),
    ]


def test_cold_start_selection():
    # polars' seeded sample picks the SFT cold-start rows; a moved pick re-pays the LLM reasoning
    # traces of every newly picked row and changes the SFT set.
    frame = pl.DataFrame({"question_id": [f"omnispatial/{index}_0" for index in range(20)], "split": "train"})
    selected = select_rows(frame, ColdStartSettings(samples=5, seed=0))
    assert selected["question_id"].to_list() == [
        "omnispatial/5_0",
        "omnispatial/17_0",
        "omnispatial/6_0",
        "omnispatial/0_0",
        "omnispatial/9_0",
    ]
    spatialcore_train = tiny_training_frames(rows=8)["spatialcore_train"]
    assert build_sft_frame(spatialcore_train, samples=4)["question_id"].to_list() == ["q1", "q6", "q2", "q0"]
