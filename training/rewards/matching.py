"""One-to-one assignment between predicted and reference items (Hungarian algorithm).

A thin, safe layer over ``scipy.optimize.linear_sum_assignment``: empty matrices give empty
assignments, rectangular matrices assign ``min(N, M)`` pairs, and non-finite entries are rejected
(the rewards build their matrices from finite numbers, so a non-finite entry is a bug). SciPy is
imported when a matching is computed, so the reward library imports where only torch and numpy are
installed (the GPU benchmark's bare machine).

SpatialCORE Eq. 4 / Eq. 14: ``M* = argmax_M sum_{(j,k) in M} R_BBox^(j,k)`` -> :func:`hungarian_max`.
SpatialThinker: minimum total cost ``2 (1 - sim) + (1 - (CIoU + 1) / 2)`` -> :func:`hungarian_min`.

>>> rows, cols = hungarian_max([[0.9, 0.1], [0.8, 0.7]])
>>> list(zip(rows.tolist(), cols.tolist()))
[(0, 0), (1, 1)]
"""

from __future__ import annotations

import numpy as np

_EMPTY = np.zeros(0, dtype=np.intp)


def _checked(matrix) -> np.ndarray:
    array = np.asarray(matrix, dtype=np.float64)
    if array.ndim != 2:
        if array.size == 0:
            return np.zeros((0, 0), dtype=np.float64)
        raise ValueError(f"assignment matrix must be 2-D, got shape {array.shape}")
    if not np.all(np.isfinite(array)):
        raise ValueError("assignment matrix has non-finite entries")
    return array


def hungarian_max(score) -> tuple[np.ndarray, np.ndarray]:
    """Rows and columns of the one-to-one assignment with the largest total ``score``.

    Args:
        score (`array-like` of shape `(N, M)`): pair scores, finite.

    Returns:
        `tuple[np.ndarray, np.ndarray]`: row indices (sorted) and their columns; ``min(N, M)`` pairs.

    >>> rows, cols = hungarian_max([[1.0], [3.0]])
    >>> rows.tolist(), cols.tolist()
    ([1], [0])
    """
    array = _checked(score)
    if array.size == 0:
        return _EMPTY, _EMPTY
    from scipy.optimize import linear_sum_assignment

    rows, cols = linear_sum_assignment(array, maximize=True)
    return rows, cols


def hungarian_min(cost) -> tuple[np.ndarray, np.ndarray]:
    """Rows and columns of the one-to-one assignment with the smallest total ``cost``.

    >>> rows, cols = hungarian_min([[5.0, 1.0], [1.0, 5.0]])
    >>> cols.tolist()
    [1, 0]
    """
    array = _checked(cost)
    if array.size == 0:
        return _EMPTY, _EMPTY
    from scipy.optimize import linear_sum_assignment

    rows, cols = linear_sum_assignment(array)
    return rows, cols
