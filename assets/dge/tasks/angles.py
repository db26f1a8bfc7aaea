"""Directions on the floor: signed angles and the answer classes (front/behind/left/right, quadrants) they fall in.

Angles are measured in the gravity frame's xy-plane seen from above (``z`` up), counter-clockwise
(to the left) positive. Each classifier also returns the distance to the nearest boundary between
two classes, which the task types compare with their margin.

>>> signed_angle_deg(np.array([0.0, 1.0]), np.array([-1.0, 1.0]))
45.0
>>> direction_of(100.0), quadrant_of(-30.0)
(('to the left', 35.0), ('front-right', 30.0))
"""

from __future__ import annotations

import math

import numpy as np

DIRECTIONS_4 = ["in front", "behind", "to the left", "to the right"]
QUADRANTS = ["front-left", "front-right", "back-left", "back-right"]


def signed_angle_deg(reference: np.ndarray, vector: np.ndarray) -> float:
    """Angle from ``reference`` to ``vector`` in the xy-plane, counter-clockwise (left) positive."""
    cross = reference[0] * vector[1] - reference[1] * vector[0]
    dot = reference[0] * vector[0] + reference[1] * vector[1]
    return math.degrees(math.atan2(cross, dot))


def direction_of(angle_deg: float) -> tuple[str, float]:
    """Front/behind/left/right of a signed angle, and its distance to the nearest class boundary (degrees)."""
    a = abs(angle_deg)
    if a <= 45:
        label = "in front"
    elif a >= 135:
        label = "behind"
    else:
        label = "to the left" if angle_deg > 0 else "to the right"
    boundary = min(abs(a - 45), abs(a - 135))
    return label, boundary


def quadrant_of(angle_deg: float) -> tuple[str, float]:
    """Front-left/front-right/back-left/back-right of a signed angle, and its distance to the nearest boundary."""
    front = abs(angle_deg) < 90
    left = angle_deg > 0
    label = ("front-" if front else "back-") + ("left" if left else "right")
    boundary = min(abs(angle_deg), abs(abs(angle_deg) - 90), 180 - abs(angle_deg))
    return label, boundary
