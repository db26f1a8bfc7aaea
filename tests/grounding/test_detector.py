"""Grounding DINO: label mapping, thresholds and scaling (decode_detections), and the plumbing of
batched inference on a tiny model built locally with random weights."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from assets.grounding.detector import (
    DetectorSettings,
    GroundingDinoDetector,
    decode_detections,
    load_grounding_dino,
    phrase_token_spans,
    text_prompt,
)
from data_contracts.boxes import cxcywh_to_xyxy, pixels_to_grid

PHRASES = ["red car", "dog"]
SPANS = [(1, 3), (4, 5)]  # [CLS] red car . dog . [SEP]


def _probabilities(rows: list[list[float]]) -> np.ndarray:
    """Rows of token probabilities for positions 0..6 of the prompt above."""
    return np.array(rows, dtype=np.float64)


BOXES = np.array([[0.25, 0.25, 0.5, 0.5], [0.75, 0.75, 0.5, 0.5], [0.5, 0.5, 0.2, 0.2], [0.5, 0.5, 1.0, 1.0]])


class TestDecodeDetections:
    def test_highest_scoring_box_per_label(self):
        probabilities = _probabilities(
            [
                [0, 0.6, 0.5, 0, 0.0, 0, 0],  # red car, 0.6
                [0, 0.0, 0.0, 0, 0.7, 0, 0],  # dog, 0.7
                [0, 0.9, 0.8, 0, 0.1, 0, 0],  # red car, 0.9: beats the first
                [0, 0.1, 0.1, 0, 0.2, 0, 0],  # below every threshold
            ]
        )
        result = decode_detections(probabilities, BOXES, SPANS, PHRASES, 640, 480)
        assert [(item["label"], item["validity"]) for item in result.pseudo_gt] == [
            ("red car", 0.9),
            ("dog", 0.7),
        ]
        assert result.pseudo_gt[0]["bbox_2d"] == [400, 400, 600, 600]  # query 2's box, not query 0's
        assert result.num_candidates == 3 and result.unmatched_phrases == []

    @pytest.mark.parametrize(
        ("box_threshold", "kept"),
        [
            (0.3, ["red car", "dog"]),  # the paper's threshold keeps both
            (0.35, ["red car"]),  # a score exactly at the threshold is kept, below is dropped
            (0.5, []),  # nothing reaches it
        ],
    )
    def test_box_threshold(self, box_threshold, kept):
        probabilities = _probabilities([[0, 0.35, 0.2, 0, 0, 0, 0], [0, 0, 0, 0, 0.3, 0, 0]])
        result = decode_detections(probabilities, BOXES[:2], SPANS, PHRASES, 100, 100, box_threshold, 0.25)
        assert [item["label"] for item in result.pseudo_gt] == kept
        assert all(item["validity"] >= box_threshold for item in result.pseudo_gt)
        assert len(result.unmatched_phrases) == 2 - len(kept)

    def test_text_threshold_decides_the_label(self):
        # the peak token (0.5, "dog") is one token; "red car" holds more mass above the text threshold
        probabilities = _probabilities([[0, 0.45, 0.45, 0, 0.5, 0, 0]])
        assert (
            decode_detections(probabilities, BOXES[:1], SPANS, PHRASES, 100, 100).pseudo_gt[0]["label"]
            == "red car"
        )
        # with a text threshold above the "red car" tokens, only "dog" can claim the detection
        result = decode_detections(probabilities, BOXES[:1], SPANS, PHRASES, 100, 100, 0.3, 0.46)
        assert [item["label"] for item in result.pseudo_gt] == ["dog"]
        assert result.pseudo_gt[0]["validity"] == pytest.approx(0.5)

    def test_no_token_above_the_text_threshold_means_no_label(self):
        probabilities = _probabilities([[0, 0.4, 0.2, 0, 0.1, 0, 0]])
        result = decode_detections(probabilities, BOXES[:1], SPANS, PHRASES, 100, 100, 0.3, 0.45)
        assert result.pseudo_gt == [] and result.num_candidates == 0

    def test_separator_and_special_tokens_never_count(self):
        probabilities = _probabilities([[0.99, 0.1, 0.1, 0.99, 0.1, 0.99, 0.99]])
        assert decode_detections(probabilities, BOXES[:1], SPANS, PHRASES, 100, 100).pseudo_gt == []

    def test_phrases_cut_from_a_truncated_prompt_are_reported(self):
        probabilities = _probabilities([[0, 0.9, 0.9, 0]])
        result = decode_detections(probabilities, BOXES[:1], [(1, 3)], PHRASES, 100, 100)
        assert [item["label"] for item in result.pseudo_gt] == ["red car"]
        assert result.unmatched_phrases == ["dog: cut from the text prompt (too many tokens)"]

    @pytest.mark.parametrize(("width", "height"), [(640, 480), (333, 777), (1, 1)])
    def test_boxes_scale_to_the_grid(self, width, height):
        probabilities = _probabilities([[0, 0.9, 0.9, 0, 0, 0, 0]])
        box = np.array([[0.3, 0.6, 0.2, 0.4]])
        result = decode_detections(probabilities, box, SPANS, PHRASES, width, height)
        expected = pixels_to_grid(
            [v * s for v, s in zip(cxcywh_to_xyxy([0.3, 0.6, 0.2, 0.4]), (width, height) * 2, strict=False)],
            width,
            height,
        )
        assert result.pseudo_gt[0]["bbox_2d"] == expected == [200, 400, 400, 800]

    def test_a_box_outside_the_image_is_dropped(self):
        probabilities = _probabilities([[0, 0.9, 0.9, 0, 0, 0, 0]])
        result = decode_detections(probabilities, np.array([[1.5, 1.5, 0.2, 0.2]]), SPANS, PHRASES, 100, 100)
        assert result.pseudo_gt == [] and "no area" in result.unmatched_phrases[0]


def test_spans_split_at_separators_and_keep_unknown_words():
    assert phrase_token_spans([101, 7, 100, 5, 9, 5, 102, 0, 0], {5}, {101, 102, 0}) == [(1, 3), (4, 5)]


def test_prompt_is_lower_case_and_separated():
    assert text_prompt(["Red Car", "dog."]) == "red car. dog."


@pytest.fixture(scope="module")
def detector_parts(tiny_grounding_dino):
    model, processor, _ = load_grounding_dino(str(tiny_grounding_dino), device="cpu")
    return model, processor


def _detector(detector_parts, **settings) -> GroundingDinoDetector:
    model, processor = detector_parts
    return GroundingDinoDetector(
        DetectorSettings(model="tiny", device="cpu", **settings), model=model, processor=processor
    )


def _images(count: int, size=(96, 64)) -> list[Image.Image]:
    rng = np.random.default_rng(0)
    return [
        Image.fromarray(rng.integers(0, 255, size=(size[1], size[0], 3), dtype=np.uint8))
        for _ in range(count)
    ]


PHRASE_LISTS = [
    ["red box", "green plant"],
    ["orange chair"],
    ["dog", "blue ball", "white lamp"],
    ["cat"],
    ["vase"],
]


class TestTinyGroundingDino:
    def test_loads_from_a_local_folder(self, tiny_grounding_dino):
        detector = GroundingDinoDetector(DetectorSettings(model=str(tiny_grounding_dino), device="auto"))
        assert detector.device == "cpu"
        result = detector.detect(_images(1), [["red box"]])[0]
        assert [item["label"] for item in result.pseudo_gt] in ([], ["red box"])

    def test_batches_and_skips_images_without_phrases(self, detector_parts):
        detector = _detector(detector_parts, batch_size=2)
        phrase_lists = PHRASE_LISTS[:2] + [[]] + PHRASE_LISTS[2:]
        results = detector.detect(_images(len(phrase_lists)), phrase_lists)
        assert (
            detector.forward_passes == 3
        )  # five images with phrases, two per pass; the empty one is not run
        assert results[2].pseudo_gt == [] and results[2].num_candidates == 0

    def test_batched_equals_one_at_a_time(self, detector_parts):
        images = _images(len(PHRASE_LISTS))
        batched = _detector(detector_parts, batch_size=len(images), box_threshold=0.0).detect(
            images, PHRASE_LISTS
        )
        single = _detector(detector_parts, batch_size=1, box_threshold=0.0).detect(images, PHRASE_LISTS)
        for one, other in zip(batched, single, strict=True):
            assert [item["label"] for item in one.pseudo_gt] == [item["label"] for item in other.pseudo_gt]
            for a, b in zip(one.pseudo_gt, other.pseudo_gt, strict=False):
                assert np.abs(np.subtract(a["bbox_2d"], b["bbox_2d"])).max() <= 1
                assert a["validity"] == pytest.approx(b["validity"], abs=1e-4)

    def test_labels_are_the_phrases_and_thresholds_apply(self, detector_parts):
        images = _images(len(PHRASE_LISTS))
        everything = _detector(detector_parts, box_threshold=0.0, text_threshold=0.0).detect(
            images, PHRASE_LISTS
        )
        for phrases, result in zip(PHRASE_LISTS, everything, strict=True):
            labels = [item["label"] for item in result.pseudo_gt]
            assert labels == [
                phrase for phrase in phrases if phrase in labels
            ]  # phrase order, one box per label
        scores = sorted(item["validity"] for result in everything for item in result.pseudo_gt)
        assert 0.0 < scores[0] < scores[-1] < 1.0  # the tiny model's scores spread out
        middle = scores[len(scores) // 2]
        some = _detector(detector_parts, box_threshold=middle).detect(images, PHRASE_LISTS)
        kept = [item["validity"] for result in some for item in result.pseudo_gt]
        assert kept and min(kept) >= middle and len(kept) < len(scores)
        above = _detector(detector_parts, box_threshold=float(np.nextafter(scores[-1], 2.0))).detect(
            images, PHRASE_LISTS
        )
        assert all(result.pseudo_gt == [] for result in above)
        assert all(result.unmatched_phrases for result in above)

    def test_scaling_matches_the_processors_own_post_processing(self, detector_parts):
        import torch

        model, processor = detector_parts
        image = _images(1, size=(150, 90))[0]
        detector = _detector(detector_parts, box_threshold=0.0, text_threshold=0.0)
        result = detector.detect([image], [["red box"]])[0]
        inputs = processor(images=[image], text=["red box."], return_tensors="pt")
        with torch.inference_mode():
            outputs = model(**inputs)
        reference = processor.post_process_grounded_object_detection(
            outputs,
            inputs["input_ids"],
            threshold=0.0,
            text_threshold=0.0,
            target_sizes=[(image.height, image.width)],
        )[0]
        reference_boxes = {
            tuple(pixels_to_grid(box, image.width, image.height)) for box in reference["boxes"].tolist()
        }
        assert result.pseudo_gt and tuple(result.pseudo_gt[0]["bbox_2d"]) in reference_boxes
        assert result.pseudo_gt[0]["validity"] == pytest.approx(float(reference["scores"].max()), abs=1e-5)


def test_settings_are_checked():
    with pytest.raises(ValueError):
        DetectorSettings(box_threshold=1.5)
    with pytest.raises(ValueError):
        DetectorSettings(batch_size=0)
    with pytest.raises(ValueError):
        DetectorSettings(dtype="int8")
