"""Box convention: canonical form, pixel conversions and every model family's round trip."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from data_contracts.boxes import (
    BoxError,
    UnknownModelFamilyError,
    cxcywh_to_xyxy,
    family_of_model,
    from_model_convention,
    grid_to_pixels,
    is_canonical,
    normalize_grid_box,
    pixels_to_grid,
    smart_resize,
    to_model_convention,
    xywh_to_xyxy,
)


class TestPixelsToGrid:
    cases = [
        ([32, 24, 64, 48], 320, 240, [100, 100, 200, 200]),  # exact tenths of the image
        ([-10, -10, 64, 48], 320, 240, [0, 0, 200, 200]),  # parts outside the image are clipped
        ([64, 48, 32, 24], 320, 240, [100, 100, 200, 200]),  # corners given in the wrong order
        ([10.0, 10.0, 10.2, 10.2], 1000, 1000, [10, 10, 11, 11]),  # thinner than a cell: one cell wide
        ([0, 0, 320, 240], 320, 240, [0, 0, 1000, 1000]),  # the whole image
    ]

    @pytest.mark.parametrize("box, width, height, expected", cases)
    def test_cases(self, box, width, height, expected):
        assert pixels_to_grid(box, width, height) == expected

    @pytest.mark.parametrize(
        "box",
        [
            [400, 10, 500, 20],  # entirely right of a 320-wide image
            [10, 10, 10, 50],  # zero width
            [1, 2, 3],  # three numbers
            [0, 0, float("nan"), 5],  # not finite
        ],
    )
    def test_rejects(self, box):
        with pytest.raises(BoxError):
            pixels_to_grid(box, 320, 240)


def test_normalize_and_is_canonical():
    assert normalize_grid_box([5.2, 990.7, 0, 1200]) == [0, 991, 5, 1000]
    assert is_canonical([0, 0, 1, 1])
    assert not is_canonical([0, 0, 0, 1])  # no width
    assert not is_canonical([0.0, 0, 1, 1])  # floats are not canonical
    with pytest.raises(BoxError):
        normalize_grid_box([10, 10, 10, 20])


def test_source_box_layouts():
    assert xywh_to_xyxy([10, 20, 30, 40]) == [10, 20, 40, 60]
    assert cxcywh_to_xyxy([50, 50, 20, 10]) == [40, 45, 60, 55]


def test_smart_resize_matches_transformers():
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import smart_resize as reference

    for height, width in [(480, 640), (240, 320), (1080, 1920), (37, 4000), (28, 28), (5000, 5000)]:
        assert smart_resize(height, width) == reference(
            height, width, factor=28, min_pixels=56 * 56, max_pixels=28 * 28 * 16384
        )


grid_boxes = st.tuples(
    st.integers(0, 999), st.integers(0, 999), st.integers(1, 1000), st.integers(1, 1000)
).filter(lambda b: b[2] > b[0] and b[3] > b[1])


class TestModelConventions:
    @given(box=grid_boxes, width=st.integers(32, 4000), height=st.integers(32, 4000))
    def test_grid_families_are_identity(self, box, width, height):
        for family in ("qwen2_vl", "qwen3_vl"):
            converted = to_model_convention(list(box), family, width, height)
            assert converted == list(box)
            assert from_model_convention(converted, family, width, height) == list(box)

    @given(box=grid_boxes, width=st.integers(64, 4000), height=st.integers(64, 4000))
    def test_pixel_families_round_trip_within_pixel_precision(self, box, width, height):
        for family, (w, h) in (
            ("qwen2_5_vl", smart_resize(height, width)[::-1]),
            ("original_pixels", (width, height)),
        ):
            pixels = to_model_convention(list(box), family, width, height)
            back = from_model_convention(pixels, family, width, height)
            # rounding to whole pixels, plus one pixel when a sub-pixel box is widened
            tolerance_x = 2 * 1000 / w + 1
            tolerance_y = 2 * 1000 / h + 1
            assert abs(back[0] - box[0]) <= tolerance_x and abs(back[2] - box[2]) <= tolerance_x
            assert abs(back[1] - box[1]) <= tolerance_y and abs(back[3] - box[3]) <= tolerance_y

    def test_qwen2_5_uses_resized_pixels(self):
        # 640x480 resizes to 644x476 under Qwen2.5-VL's rule.
        assert to_model_convention([0, 0, 1000, 1000], "qwen2_5_vl", 640, 480) == [0, 0, 644, 476]
        assert grid_to_pixels([0, 0, 1000, 1000], 644, 476) == [0.0, 0.0, 644.0, 476.0]

    def test_unknown_family(self):
        with pytest.raises(UnknownModelFamilyError, match="qwen2_5_vl"):
            to_model_convention([0, 0, 10, 10], "llava", 10, 10)

    @pytest.mark.parametrize(
        "name, family",
        [
            ("Qwen/Qwen3-VL-8B-Thinking", "qwen3_vl"),  # hub id
            ("Qwen/Qwen2.5-VL-7B-Instruct", "qwen2_5_vl"),  # dotted version
            ("qwen2_vl", "qwen2_vl"),  # config.model_type
        ],
    )
    def test_family_of_model(self, name, family):
        assert family_of_model(name) == family
