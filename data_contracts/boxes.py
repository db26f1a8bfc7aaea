"""The project's one box convention, and every conversion to and from it.

Canonical form (what every Parquet cache stores): integer ``[x1, y1, x2, y2]`` on the 0..1000
grid of the image, x left to right, y top to bottom, ``x2 > x1`` and ``y2 > y1``, with the image's
width and height stored beside the box.

Model families speak different conventions:

| family        | convention                                                        |
|---------------|-------------------------------------------------------------------|
| ``qwen2_vl``  | 0..1000 grid (same as canonical)                                  |
| ``qwen3_vl``  | 0..1000 grid (same as canonical)                                  |
| ``qwen2_5_vl``| absolute pixels of the *resized* input (the processor's ``smart_resize``) |
| ``original_pixels`` | pixels of the original image (SpatialThinker's prompt states these) |

>>> pixels_to_grid([32, 24, 64, 48], width=320, height=240)
[100, 100, 200, 200]
>>> grid_to_pixels([100, 100, 200, 200], width=320, height=240)
[32.0, 24.0, 64.0, 48.0]
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

GRID_SIZE = 1000
MODEL_FAMILIES = ("qwen2_vl", "qwen2_5_vl", "qwen3_vl", "original_pixels")

# Qwen2.5-VL's image processor defaults (preprocessor_config.json of the released checkpoints).
QWEN2_5_VL_PATCH_FACTOR = 28
QWEN2_5_VL_MIN_PIXELS = 56 * 56
QWEN2_5_VL_MAX_PIXELS = 28 * 28 * 16384


class BoxError(ValueError):
    """A box that cannot be put into canonical form (wrong length, not finite, no area)."""


class UnknownModelFamilyError(ValueError):
    """A model family whose coordinate convention this project does not know."""

    def __init__(self, family: str):
        super().__init__(
            f"unknown model family {family!r} for box coordinates; known families: {', '.join(MODEL_FAMILIES)}"
        )


@dataclass(frozen=True)
class ResizeRule:
    """Qwen2.5-VL's resize rule: sides rounded to multiples of ``factor`` within a pixel budget."""

    factor: int = QWEN2_5_VL_PATCH_FACTOR
    min_pixels: int = QWEN2_5_VL_MIN_PIXELS
    max_pixels: int = QWEN2_5_VL_MAX_PIXELS


def smart_resize(height: int, width: int, rule: ResizeRule = ResizeRule()) -> tuple[int, int]:
    """Return ``(resized_height, resized_width)`` as Qwen2.5-VL's processor computes them.

    Same arithmetic as ``transformers.models.qwen2_vl.image_processing_pil_qwen2_vl.smart_resize``.

    >>> smart_resize(480, 640)
    (476, 644)
    """
    if height <= 0 or width <= 0:
        raise BoxError(f"image size must be positive, got {width}x{height}")
    factor = rule.factor
    resized_height = max(factor, round(height / factor) * factor)
    resized_width = max(factor, round(width / factor) * factor)
    if resized_height * resized_width > rule.max_pixels:
        beta = math.sqrt((height * width) / rule.max_pixels)
        resized_height = max(factor, math.floor(height / beta / factor) * factor)
        resized_width = max(factor, math.floor(width / beta / factor) * factor)
    elif resized_height * resized_width < rule.min_pixels:
        beta = math.sqrt(rule.min_pixels / (height * width))
        resized_height = math.ceil(height * beta / factor) * factor
        resized_width = math.ceil(width * beta / factor) * factor
    return resized_height, resized_width


def _four_finite(box: Sequence[float]) -> tuple[float, float, float, float]:
    if len(box) != 4:
        raise BoxError(f"a box has 4 numbers [x1, y1, x2, y2], got {len(box)}: {list(box)!r}")
    x1, y1, x2, y2 = (float(v) for v in box)
    if not all(math.isfinite(v) for v in (x1, y1, x2, y2)):
        raise BoxError(f"box has a non-finite coordinate: {list(box)!r}")
    return x1, y1, x2, y2


def normalize_grid_box(box: Sequence[float]) -> list[int]:
    """Round, clip to 0..1000 and order a grid box; raise :class:`BoxError` if it has no area.

    >>> normalize_grid_box([10.4, 20.6, 5, 40])
    [5, 21, 10, 40]
    """
    x1, y1, x2, y2 = _four_finite(box)
    x1, x2 = sorted((x1, x2))
    y1, y2 = sorted((y1, y2))
    ix1, iy1, ix2, iy2 = (int(round(min(max(v, 0.0), GRID_SIZE))) for v in (x1, y1, x2, y2))
    if ix2 <= ix1 or iy2 <= iy1:
        raise BoxError(f"box has no area on the 0..{GRID_SIZE} grid: {list(box)!r}")
    return [ix1, iy1, ix2, iy2]


def is_canonical(box: Sequence[float]) -> bool:
    """True when ``box`` is 4 integers on the grid with ``x2 > x1`` and ``y2 > y1``."""
    if len(box) != 4 or not all(isinstance(v, int) and not isinstance(v, bool) for v in box):
        return False
    x1, y1, x2, y2 = box
    return 0 <= x1 < x2 <= GRID_SIZE and 0 <= y1 < y2 <= GRID_SIZE


def pixels_to_grid(box_px: Sequence[float], width: int, height: int) -> list[int]:
    """Convert a pixel box ``[x1, y1, x2, y2]`` of a ``width`` x ``height`` image to the grid.

    Parts outside the image are clipped; a box that ends up without area raises :class:`BoxError`.
    A box that is valid in pixels but thinner than one grid cell is widened to one cell.
    """
    if width <= 0 or height <= 0:
        raise BoxError(f"image size must be positive, got {width}x{height}")
    x1, y1, x2, y2 = _four_finite(box_px)
    x1, x2 = sorted((x1, x2))
    y1, y2 = sorted((y1, y2))
    x1, x2 = max(x1, 0.0), min(x2, float(width))
    y1, y2 = max(y1, 0.0), min(y2, float(height))
    if x2 <= x1 or y2 <= y1:
        raise BoxError(f"box {list(box_px)!r} has no area inside the {width}x{height} image")
    grid = [x1 / width * GRID_SIZE, y1 / height * GRID_SIZE, x2 / width * GRID_SIZE, y2 / height * GRID_SIZE]
    ix1, iy1, ix2, iy2 = (int(round(v)) for v in grid)
    if ix2 <= ix1:
        ix1, ix2 = (ix1, ix1 + 1) if ix1 < GRID_SIZE else (GRID_SIZE - 1, GRID_SIZE)
    if iy2 <= iy1:
        iy1, iy2 = (iy1, iy1 + 1) if iy1 < GRID_SIZE else (GRID_SIZE - 1, GRID_SIZE)
    return [ix1, iy1, ix2, iy2]


def grid_to_pixels(box: Sequence[float], width: int, height: int) -> list[float]:
    """Convert a grid box to pixel coordinates of a ``width`` x ``height`` image (floats)."""
    x1, y1, x2, y2 = _four_finite(box)
    return [x1 * width / GRID_SIZE, y1 * height / GRID_SIZE, x2 * width / GRID_SIZE, y2 * height / GRID_SIZE]


def xywh_to_xyxy(box: Sequence[float]) -> list[float]:
    """COCO / Visual Genome ``[x, y, w, h]`` (top-left corner) to ``[x1, y1, x2, y2]``."""
    x, y, w, h = _four_finite(box)
    return [x, y, x + w, y + h]


def cxcywh_to_xyxy(box: Sequence[float]) -> list[float]:
    """Centre ``[cx, cy, w, h]`` (VG150, Grounding DINO) to ``[x1, y1, x2, y2]``."""
    cx, cy, w, h = _four_finite(box)
    return [cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2]


def to_model_convention(
    box: Sequence[float], family: str, width: int, height: int, resize_rule: ResizeRule = ResizeRule()
) -> list[int]:
    """Express a canonical grid box in ``family``'s convention for an original ``width`` x ``height`` image.

    >>> to_model_convention([100, 100, 200, 200], "qwen3_vl", 640, 480)
    [100, 100, 200, 200]
    >>> to_model_convention([100, 100, 200, 200], "qwen2_5_vl", 640, 480)
    [64, 48, 129, 95]
    """
    if family in ("qwen2_vl", "qwen3_vl"):
        return normalize_grid_box(box)
    if family == "qwen2_5_vl":
        resized_height, resized_width = smart_resize(height, width, resize_rule)
        return _integer_pixel_box(
            grid_to_pixels(box, resized_width, resized_height), resized_width, resized_height
        )
    if family == "original_pixels":
        return _integer_pixel_box(grid_to_pixels(box, width, height), width, height)
    raise UnknownModelFamilyError(family)


def _integer_pixel_box(box: list[float], width: int, height: int) -> list[int]:
    """Round a pixel box to integers, keeping at least one pixel of width and height."""
    x1, y1, x2, y2 = (int(round(v)) for v in box)
    if x2 <= x1:
        x1, x2 = (x1, x1 + 1) if x1 < width else (width - 1, width)
    if y2 <= y1:
        y1, y2 = (y1, y1 + 1) if y1 < height else (height - 1, height)
    return [x1, y1, x2, y2]


def from_model_convention(
    box: Sequence[float], family: str, width: int, height: int, resize_rule: ResizeRule = ResizeRule()
) -> list[int]:
    """Read a box written in ``family``'s convention back into the canonical grid form.

    Integer pixels of a resized image are coarser than the grid on small images, so a round trip
    through ``qwen2_5_vl`` can move a coordinate by one grid unit:

    >>> from_model_convention([64, 48, 129, 95], "qwen2_5_vl", 640, 480)
    [99, 101, 200, 200]
    """
    if family in ("qwen2_vl", "qwen3_vl"):
        return normalize_grid_box(box)
    if family == "qwen2_5_vl":
        resized_height, resized_width = smart_resize(height, width, resize_rule)
        return pixels_to_grid(box, resized_width, resized_height)
    if family == "original_pixels":
        return pixels_to_grid(box, width, height)
    raise UnknownModelFamilyError(family)


def family_of_model(model_name_or_type: str) -> str:
    """Map a model id or ``config.model_type`` (``"Qwen/Qwen2.5-VL-7B-Instruct"``, ``"qwen3_vl"``) to a family.

    >>> family_of_model("Qwen/Qwen3-VL-8B-Thinking")
    'qwen3_vl'
    """
    key = model_name_or_type.lower().replace("-", "_").replace(".", "_")
    for family in ("qwen2_5_vl", "qwen3_vl", "qwen2_vl"):
        if family in key:
            return family
    raise UnknownModelFamilyError(model_name_or_type)
