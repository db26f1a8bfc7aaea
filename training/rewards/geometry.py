"""Box overlap measures, vectorised over all pairs with numpy.

Boxes are ``[x1, y1, x2, y2]`` (x right, y down) in any one coordinate frame: the canonical 0..1000
grid of the project (``data_contracts.boxes``) or pixels. Every function takes two arrays of shape
``(N, 4)`` and ``(M, 4)`` (or anything ``numpy`` turns into them) and returns an ``(N, M)`` matrix.
Widths and heights below zero are treated as zero, so every output is finite for finite input.

* IoU: intersection over union, in ``[0, 1]``; 0 when the union is empty.
* GIoU (Rezatofighi et al. 2019): ``IoU - (C - U) / C`` with ``C`` the enclosing box area, in ``[-1, 1]``.
* CIoU (Zheng et al. 2020): ``IoU - rho^2 / c^2 - alpha * v``, with ``rho`` the centre distance, ``c``
  the enclosing-box diagonal, ``v = 4 / pi^2 (atan(w_gt / h_gt) - atan(w / h))^2`` and
  ``alpha = v / ((1 - IoU) + v)``. Range ``(-1.5, 1]``; SpatialThinker maps it to ``(CIoU + 1) / 2``.

>>> pairwise_iou([[0, 0, 10, 10]], [[5, 0, 15, 10], [20, 20, 30, 30]]).round(4).tolist()
[[0.3333, 0.0]]
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

# Same small constant as the public SpatialThinker CIoU (keeps divisions finite).
CIOU_EPS = 1e-7
_FOUR_OVER_PI_SQUARED = 4.0 / (math.pi**2)


def as_boxes(boxes: Sequence[Sequence[float]] | np.ndarray) -> np.ndarray:
    """Return ``boxes`` as a float64 array of shape ``(N, 4)`` (``(0, 4)`` when empty).

    >>> as_boxes([]).shape, as_boxes([[1, 2, 3, 4]]).dtype
    ((0, 4), dtype('float64'))
    """
    array = np.asarray(boxes, dtype=np.float64)
    if array.size == 0:
        return np.zeros((0, 4), dtype=np.float64)
    return array.reshape(-1, 4)


def _pair_terms(boxes_a, boxes_b):
    a = as_boxes(boxes_a)[:, None, :]
    b = as_boxes(boxes_b)[None, :, :]
    width_a = np.maximum(a[..., 2] - a[..., 0], 0.0)
    height_a = np.maximum(a[..., 3] - a[..., 1], 0.0)
    width_b = np.maximum(b[..., 2] - b[..., 0], 0.0)
    height_b = np.maximum(b[..., 3] - b[..., 1], 0.0)
    inter_w = np.maximum(np.minimum(a[..., 2], b[..., 2]) - np.maximum(a[..., 0], b[..., 0]), 0.0)
    inter_h = np.maximum(np.minimum(a[..., 3], b[..., 3]) - np.maximum(a[..., 1], b[..., 1]), 0.0)
    intersection = inter_w * inter_h
    union = width_a * height_a + width_b * height_b - intersection
    iou = np.divide(intersection, union, out=np.zeros_like(intersection), where=union > 0)
    return a, b, width_a, height_a, width_b, height_b, union, iou


def pairwise_iou(boxes_a, boxes_b) -> np.ndarray:
    """IoU of every box in ``boxes_a`` with every box in ``boxes_b``; shape ``(N, M)``, in ``[0, 1]``.

    >>> float(pairwise_iou([[0, 0, 2, 2]], [[1, 1, 3, 3]])[0, 0])
    0.14285714285714285
    """
    return _pair_terms(boxes_a, boxes_b)[-1]


def pairwise_giou(boxes_a, boxes_b) -> np.ndarray:
    """Generalised IoU of all pairs; shape ``(N, M)``, in ``[-1, 1]``.

    >>> float(pairwise_giou([[0, 0, 1, 1]], [[2, 0, 3, 1]])[0, 0])
    -0.3333333333333333
    """
    a, b, _, _, _, _, union, iou = _pair_terms(boxes_a, boxes_b)
    enclose_w = np.maximum(np.maximum(a[..., 2], b[..., 2]) - np.minimum(a[..., 0], b[..., 0]), 0.0)
    enclose_h = np.maximum(np.maximum(a[..., 3], b[..., 3]) - np.minimum(a[..., 1], b[..., 1]), 0.0)
    enclose = enclose_w * enclose_h
    penalty = np.divide(enclose - union, enclose, out=np.zeros_like(enclose), where=enclose > 0)
    return iou - penalty


def pairwise_ciou(boxes_a, boxes_b) -> np.ndarray:
    """Complete IoU of all pairs (``boxes_b`` plays the ground truth in the aspect term); ``(N, M)``.

    Same formula as the public SpatialThinker reward (``eps = 1e-7``), vectorised.

    >>> float(pairwise_ciou([[0, 0, 10, 10]], [[0, 0, 10, 10]])[0, 0])
    1.0
    """
    a, b, width_a, height_a, width_b, height_b, _, iou = _pair_terms(boxes_a, boxes_b)
    center_dx = (a[..., 0] + a[..., 2] - b[..., 0] - b[..., 2]) / 2.0
    center_dy = (a[..., 1] + a[..., 3] - b[..., 1] - b[..., 3]) / 2.0
    center_distance_sq = center_dx**2 + center_dy**2
    enclose_w = np.maximum(a[..., 2], b[..., 2]) - np.minimum(a[..., 0], b[..., 0])
    enclose_h = np.maximum(a[..., 3], b[..., 3]) - np.minimum(a[..., 1], b[..., 1])
    diagonal_sq = enclose_w**2 + enclose_h**2 + CIOU_EPS
    aspect = (
        _FOUR_OVER_PI_SQUARED
        * (np.arctan(width_b / (height_b + CIOU_EPS)) - np.arctan(width_a / (height_a + CIOU_EPS))) ** 2
    )
    denominator = (1.0 - iou) + aspect
    alpha = np.divide(aspect, denominator, out=np.zeros_like(aspect), where=denominator > 0)
    return iou - (center_distance_sq / diagonal_sq + alpha * aspect)
