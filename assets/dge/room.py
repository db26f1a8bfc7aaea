"""Room size and floor area from the gravity-aligned scene cloud.

The room's footprint is the convex hull of every point's ``(x, y)`` (walls bound it), its length
and width those of the hull's minimum-area rectangle, its height the highest point (the ceiling
where it was seen; the cloud is cleaned of outliers before). The floor area is the area of the convex hull of the floor
points (within the floor threshold of ``z = 0``).

>>> import numpy as np
>>> xs, ys = np.meshgrid(np.linspace(0, 4, 21), np.linspace(0, 3, 16))
>>> floor = np.stack([xs.ravel(), ys.ravel(), np.zeros(xs.size)], axis=1)
>>> ceiling = floor + [0, 0, 2.5]
>>> room = measure_room(np.vstack([floor, ceiling]))
>>> round(room.length_m, 3), round(room.width_m, 3), round(room.height_m, 3), round(room.area_m2, 3)
(4.0, 3.0, 2.5, 12.0)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.spatial import ConvexHull, QhullError

from assets.dge.objects import min_area_rectangle


@dataclass(frozen=True)
class RoomGeometry:
    """The room's size in the gravity-aligned frame (metres, square metres)."""

    length_m: float
    width_m: float
    height_m: float
    area_m2: float
    floor_area_m2: float
    yaw: float
    footprint: np.ndarray  # (K, 2) convex hull of the points' xy, counter-clockwise


def hull_area(points_xy: np.ndarray) -> tuple[float, np.ndarray]:
    """Area and vertices of the 2D convex hull (0 and the points themselves when degenerate).

    >>> hull_area(np.array([[0, 0], [1, 0], [0, 1], [1, 1.0], [0.5, 0.5]]))[0]
    1.0
    """
    if len(points_xy) < 3:
        return 0.0, np.asarray(points_xy, dtype=np.float64).reshape(-1, 2)
    try:
        hull = ConvexHull(points_xy)
    except QhullError:
        return 0.0, np.asarray(points_xy, dtype=np.float64).reshape(-1, 2)
    return float(hull.volume), points_xy[hull.vertices]


def trim_room_points(points: np.ndarray, trim_share: float) -> np.ndarray:
    """The points without the ``trim_share`` extremes along each side of the room's rectangle and its height.

    Depth noise grows with distance (several centimetres on a far wall), so the extremes of a scanned
    room's cloud are noise; the walls themselves hold far more points than any trimmed share.
    """
    if trim_share <= 0 or len(points) < 3:
        return points
    _, footprint = hull_area(points[:, :2])
    _, _, yaw = min_area_rectangle(footprint if len(footprint) >= 3 else points[:, :2])
    cos_a, sin_a = np.cos(yaw), np.sin(yaw)
    local = np.stack(
        [
            points[:, 0] * cos_a + points[:, 1] * sin_a,
            -points[:, 0] * sin_a + points[:, 1] * cos_a,
            points[:, 2],
        ],
        axis=1,
    )
    low = np.quantile(local, trim_share, axis=0)
    high = np.quantile(local, 1.0 - trim_share, axis=0)
    low[2] = -np.inf  # the floor is z = 0 by construction
    return points[np.all((local >= low) & (local <= high), axis=1)]


def measure_room(
    points: np.ndarray, floor_threshold_m: float = 0.03, trim_share: float = 0.0
) -> RoomGeometry:
    """Measure a room from its gravity-frame cloud (floor at ``z = 0``), without ``trim_share`` extremes (see
    :func:`trim_room_points`)."""
    if len(points) == 0:
        return RoomGeometry(0.0, 0.0, 0.0, 0.0, 0.0, 0.0, np.zeros((0, 2)))
    points = trim_room_points(points, trim_share)
    area, footprint = hull_area(points[:, :2])
    _, extents, yaw = min_area_rectangle(footprint if len(footprint) >= 3 else points[:, :2])
    floor_points = points[np.abs(points[:, 2]) <= floor_threshold_m]
    floor_area, _ = hull_area(floor_points[:, :2])
    height = float(points[:, 2].max())
    return RoomGeometry(
        length_m=float(extents[0]),
        width_m=float(extents[1]),
        height_m=max(height, 0.0),
        area_m2=area,
        floor_area_m2=floor_area,
        yaw=yaw,
        footprint=footprint,
    )
