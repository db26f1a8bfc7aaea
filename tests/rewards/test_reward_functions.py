"""Trainer-facing reward functions (TRL signature), metrics, pickling and the registry."""

from __future__ import annotations

import logging
import pickle
from collections import defaultdict

import pytest

from tests.rewards.builders import LN10, char_tokens, spatialcore_completion, spatialthinker_completion
from training.rewards import (
    REWARD_REGISTRY,
    DgeConfig,
    SpatialCoreConfig,
    dge_reward,
    get_dge_reward,
    get_reward_funcs,
    get_spatialcore_reward,
    get_spatialthinker_reward,
    spatialcore_reward,
    spatialthinker_reward,
)
from training.rewards.parsing import parse_spatialcore

SEDAN = ([100, 100, 300, 300], "black sedan")
PSEUDO_GT = [{"bbox_2d": [100, 100, 300, 300], "label": "black sedan", "validity": 1.0}]
SPATIALCORE_ROW = {
    "answer": "A",
    "options": ["Yes", "No"],
    "question": "Where is the black sedan?",
    "pseudo_gt": PSEUDO_GT,
}


class MetricSink:
    """Collects ``log_metric(name, value)`` calls like TRL's trainer does."""

    def __init__(self):
        self.values = defaultdict(list)

    def __call__(self, name: str, value: float) -> None:
        assert isinstance(value, float)
        self.values[name].append(value)


def batch(row: dict, n: int) -> dict:
    return {key: [value] * n for key, value in row.items()}


def entropy_entry(text: str, per_box_nats: list[float]) -> dict:
    """Char tokens with each box's digit entropies set, NaN elsewhere (what the trainer passes)."""
    values = [float("nan")] * len(text)
    for box, value in zip(parse_spatialcore(text).grounding_boxes, per_box_nats, strict=True):
        for start, end in box.coord_spans:
            for position in range(start, end):
                values[position] = value
    return {"tokens": char_tokens(text), "entropies": values}


class TestSpatialCoreRewardFunction:
    def test_plain_and_chat_completions(self):
        text = spatialcore_completion([SEDAN], "A")
        completions = [text, [{"role": "assistant", "content": text}]]
        rewards = spatialcore_reward(completions, **batch(SPATIALCORE_ROW, 2))
        assert rewards[0] == rewards[1] == pytest.approx(2.05)

    def test_box_entropies_weight_the_boxes(self):
        text = spatialcore_completion([SEDAN], "A")
        certain, uncertain = entropy_entry(text, [0.0]), entropy_entry(text, [LN10])
        rewards = spatialcore_reward(
            [text, text, text], **batch(SPATIALCORE_ROW, 3), box_entropies=[certain, uncertain, None]
        )
        assert rewards[0] == pytest.approx(2.05)  # H = 0: omega = 1
        assert rewards[1] < rewards[0]  # H = 1: omega = 0.1
        assert rewards[2] == pytest.approx(2.05)  # no entropies for this completion: no weighting

    def test_misaligned_entropies_fall_back_without_crashing(self, caplog):
        text = spatialcore_completion([SEDAN], "A")
        other = entropy_entry(spatialcore_completion([SEDAN, SEDAN], "A"), [0.0, 0.0])
        with caplog.at_level(logging.WARNING):
            rewards = spatialcore_reward(
                [text, text],
                **batch(SPATIALCORE_ROW, 2),
                box_entropies=[other, {"tokens": ["a"], "entropies": []}],
            )
        assert rewards == [pytest.approx(2.05), pytest.approx(2.05)]
        assert "no confidence weighting" in caplog.text or "without confidence weighting" in caplog.text

    def test_metrics(self):
        sink = MetricSink()
        completions = [spatialcore_completion([SEDAN], "A"), "truncated reasoning"]
        spatialcore_reward(
            completions,
            **batch(SPATIALCORE_ROW, 2),
            log_metric=sink,
            box_entropies=[entropy_entry(completions[0], [0.5 * LN10]), None],
        )
        means = {name: values[0] for name, values in sink.values.items()}
        assert means["spatialcore/answer"] == 0.5
        assert means["spatialcore/truncated"] == 0.5
        assert means["spatialcore/share_with_boxes"] == 0.5
        assert means["spatialcore/boxes_per_completion"] == 0.5
        assert means["spatialcore/mean_matched_iou"] == 1.0
        assert means["spatialcore/mean_box_entropy"] == pytest.approx(0.5)
        assert {
            "spatialcore/format",
            "spatialcore/spatial",
            "spatialcore/precision",
            "spatialcore/recall",
        } <= set(means)

    def test_bad_row_gives_none_and_good_rows_go_on(self, caplog):
        rows = batch(SPATIALCORE_ROW, 2)
        rows["answer"] = ["not a letter", "A"]
        with caplog.at_level(logging.WARNING):
            rewards = spatialcore_reward(["r</think>A", "r</think>A"], **rows)
        assert rewards[0] is None and rewards[1] == pytest.approx(1.2 - 0.3)
        assert "row 0" in caplog.text

    def test_missing_column_is_a_configuration_error(self):
        with pytest.raises(ValueError, match="pseudo_gt"):
            spatialcore_reward(["r</think>A"], answer=["A"], options=[["x", "y"]], question=["q"])

    def test_column_length_must_match(self):
        with pytest.raises(ValueError, match="values for 2 completions"):
            spatialcore_reward(["a", "b"], **batch(SPATIALCORE_ROW, 1))


class TestSpatialThinkerRewardFunction:
    def test_columns_and_metrics(self):
        sink = MetricSink()
        completion = spatialthinker_completion([("mug.1", [64, 48, 128, 96])], [], "(A) left")
        rewards = spatialthinker_reward(
            [completion, [{"role": "assistant", "content": "garbage"}]],
            answer_option_text=["(A) left"] * 2,
            gt_scene=['{"objects": [{"id": "mug.1", "bbox_2d": [100, 100, 200, 200]}], "relationships": []}']
            * 2,
            image_width=[640, 640],
            image_height=[480, 480],
            log_metric=sink,
        )
        assert rewards == [pytest.approx(1.0), 0.0]
        assert sink.values["spatialthinker/accuracy"] == [0.5]
        assert sink.values["spatialthinker/mean_matched_ciou"] == [pytest.approx(1.0)]

    def test_bad_image_size_gives_none(self):
        rewards = spatialthinker_reward(
            ["x"], answer_option_text=["(A) a"], gt_scene=[{}], image_width=[0], image_height=[10]
        )
        assert rewards == [None]


class TestDgeRewardFunction:
    def test_mixed_batch_and_per_task_metrics(self):
        sink = MetricSink()
        rewards = dge_reward(
            ["<think>r</think><answer>B</answer>", "<think>r</think><answer>210 cm</answer>"],
            answer=["B", "2.0"],
            options=[["left", "right"], []],
            numeric_answer=[None, 2.0],
            unit=[None, "m"],
            task_type=["relative_direction", "absolute_distance"],
            log_metric=sink,
        )
        assert rewards == [pytest.approx(1.1), pytest.approx(1.0)]
        assert sink.values["dge/accuracy/relative_direction"] == [1.0]
        assert sink.values["dge/accuracy/absolute_distance"] == [pytest.approx(0.9)]
        assert sink.values["dge/accuracy/numeric"] == [pytest.approx(0.9)]


class TestRegistry:
    def test_keys_are_names(self):
        for name, reward in REWARD_REGISTRY.items():
            assert reward.__name__ == name

    def test_get_reward_funcs(self):
        rewards = get_reward_funcs(["spatialcore_reward", "spatialthinker_reward", "dge_reward"])
        assert [reward.__name__ for reward in rewards] == [
            "spatialcore_reward",
            "spatialthinker_reward",
            "dge_reward",
        ]

    def test_typo_lists_valid_names(self):
        with pytest.raises(ValueError) as error:
            get_reward_funcs(["spatialcore_rewrd"])
        for name in REWARD_REGISTRY:
            assert name in str(error.value)

    def test_dotted_path(self):
        assert get_reward_funcs(["training.rewards.reward_functions.dge_reward"]) == [dge_reward]
        with pytest.raises(ValueError, match="cannot import"):
            get_reward_funcs(["training.rewards.nothing_here"])
        with pytest.raises(ValueError, match="cannot import"):
            get_reward_funcs(["no_such_package_xyz.reward"])

    def test_ablation_variants(self):
        text = spatialcore_completion([SEDAN], "B")  # wrong answer
        gated = REWARD_REGISTRY["spatialcore_reward"]([text], **batch(SPATIALCORE_ROW, 1))[0]
        ungated = REWARD_REGISTRY["spatialcore_no_answer_gate_reward"]([text], **batch(SPATIALCORE_ROW, 1))[0]
        assert ungated > gated


class TestPickling:
    @pytest.mark.parametrize(
        "reward",
        [
            spatialcore_reward,
            spatialthinker_reward,
            dge_reward,
            get_spatialcore_reward(
                SpatialCoreConfig(use_confidence=False), name="spatialcore_no_confidence_reward"
            ),
            get_spatialthinker_reward(name="spatialthinker_custom_reward"),
            get_dge_reward(DgeConfig(format_weight=0.0), name="dge_answer_only_reward"),
            *REWARD_REGISTRY.values(),
        ],
    )
    def test_round_trip_keeps_name_and_behaviour(self, reward):
        restored = pickle.loads(pickle.dumps(reward))
        assert restored.__name__ == reward.__name__
        if "spatialcore" in reward.__name__:
            kwargs = batch(SPATIALCORE_ROW, 1)
            completions = [spatialcore_completion([SEDAN], "A")]
            assert restored(completions, **kwargs) == reward(completions, **kwargs)

    def test_factory_metric_prefix(self):
        sink = MetricSink()
        reward = get_spatialcore_reward(name="spatialcore_variant_reward")
        reward(["r</think>A"], **batch(SPATIALCORE_ROW, 1), log_metric=sink)
        assert all(name.startswith("spatialcore_variant/") for name in sink.values)
