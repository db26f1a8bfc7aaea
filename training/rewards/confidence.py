"""Coordinate-token uncertainty of predicted boxes and the confidence weight (SpatialCORE Eq. 5-6).

For predicted box ``b_j`` with coordinates ``c in {x1, y1, x2, y2}`` and ``S_{j,c}`` the positions of
the digit tokens of coordinate ``c`` (brackets, commas and spaces excluded), with ``h_t`` the
full-vocabulary Shannon entropy (nats) of the policy's next-token distribution at position ``t``::

    H_j = clip_[0,1]( 1 / (|C| log|D|) * sum_c  1/|S_{j,c}| sum_{t in S_{j,c}} h_t )        (Eq. 5)
    C_j = 1 - H_j,     omega_j = beta + (1 - beta) C_j                                      (Eq. 6)

with ``|C| = 4`` and ``|D| = 10`` digit tokens (Qwen tokenizers write numbers one digit per token).

Alignment: :func:`box_uncertainties` finds the boxes with the very parser the reward uses
(:func:`training.rewards.parsing.parse_spatialcore`) on the concatenated tokens, and returns one H
for each *valid box of the reasoning segment*, in order; malformed boxes and boxes after
``</think>`` neither get an entry nor shift the others (the public reference indexed entropies over
every regex match but weights over valid boxes, so they drifted apart).

>>> tokens = ['{"bbox_2d": [', '1', '0', ', ', '2', '0', ', ', '3', '0', ', ', '4', '0', '], "label": "cup"}', '</think>', 'A']
>>> nan, ln10 = float("nan"), 2.302585092994046
>>> entropies = [nan, 0.0, ln10, nan, 0.0, 0.0, nan, 0.0, 0.0, nan, 0.0, 0.0, nan, nan, nan]
>>> [round(h, 4) for h in box_uncertainties(tokens, entropies)]
[0.125]
"""

from __future__ import annotations

import bisect
import logging
import math
from collections.abc import Sequence
from itertools import accumulate

import numpy as np

from training.rewards.parsing import parse_spatialcore

logger = logging.getLogger(__name__)

LOG_NUM_DIGITS = math.log(10)
# H given to a box whose coordinate digits carry no finite entropy (no evidence of confidence).
UNKNOWN_UNCERTAINTY = 1.0


class BoxAlignmentError(ValueError):
    """Per-box uncertainties that do not line up with the boxes being scored."""


def box_uncertainties(tokens: list[str], entropies: list[float]) -> list[float]:
    """Normalised coordinate-token entropy ``H`` (Eq. 5) of each valid reasoning-segment box.

    Args:
        tokens (`list[str]`):
            The completion's tokens as decoded strings; their concatenation is the completion text.
        entropies (`list[float]`):
            Full-vocabulary entropy in nats of each token's distribution; one per token. Entries of
            non-coordinate tokens are ignored and may be NaN. NaN or infinite entries at coordinate
            digits are skipped; a coordinate without any finite digit entropy makes its box
            ``H = 1`` (no confidence credit).

    Returns:
        `list[float]`: one ``H`` in ``[0, 1]`` per valid box of the reasoning segment, in order.

    Raises:
        `ValueError`: when ``tokens`` and ``entropies`` differ in length.

    >>> box_uncertainties(["no boxes here", "</think>", "B"], [0.1, 0.2, 0.3])
    []
    """
    if len(tokens) != len(entropies):
        raise ValueError(f"{len(tokens)} tokens but {len(entropies)} entropies")
    try:
        text = "".join(tokens)
        token_texts = tokens
    except TypeError:
        token_texts = [token if isinstance(token, str) else "" for token in tokens]
        text = "".join(token_texts)
    boxes = parse_spatialcore(text).grounding_boxes
    if not boxes:
        return []
    values = entropies.tolist() if hasattr(entropies, "tolist") else entropies
    ends = list(accumulate(map(len, token_texts)))
    n_tokens = len(ends)
    result = []
    for box in boxes:
        coordinate_means: list[float] = []
        every_coordinate_read = True
        for start, end in box.coord_spans:
            index = bisect.bisect_right(ends, start)
            total, count = 0.0, 0
            while index < n_tokens and ends[index] - len(token_texts[index]) < end:
                value = _as_float(values[index])
                if token_texts[index] and math.isfinite(value):
                    total += value
                    count += 1
                index += 1
            if count == 0:
                every_coordinate_read = False
                break
            coordinate_means.append(total / count)
        if not every_coordinate_read:
            result.append(UNKNOWN_UNCERTAINTY)
            continue
        uncertainty = sum(coordinate_means) / (len(coordinate_means) * LOG_NUM_DIGITS)
        result.append(min(max(uncertainty, 0.0), 1.0))
    return result


def _as_float(value) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def confidence_weights(uncertainties: Sequence[float], confidence_floor: float) -> np.ndarray:
    """Confidence weights ``omega = beta + (1 - beta)(1 - H)`` (Eq. 6); NaN H counts as 1.

    >>> confidence_weights([0.0, 0.5, 1.0], 0.1).tolist()
    [1.0, 0.55, 0.1]
    """
    values = np.asarray(uncertainties, dtype=np.float64).reshape(-1)
    clipped = np.clip(np.nan_to_num(values, nan=UNKNOWN_UNCERTAINTY), 0.0, 1.0)
    return confidence_floor + (1.0 - confidence_floor) * (1.0 - clipped)
