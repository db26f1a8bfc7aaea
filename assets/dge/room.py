"""Room size and floor area from the gravity-aligned scene cloud.

The room's orientation is that of the minimum-area rectangle around the footprint (the convex
hull of every point's ``(x, y)``). Its length and width are the distances between its opposite
walls: vertical planes found in the cloud along each side of that rectangle (:func:`wall_position`,
the median of the points on the densest thin slab near the side, so depth noise on a far wall,
which spreads its points to both sides of it, does not lengthen the room). A slab counts as a wall
only when its points cover at least ``min_wall_cover`` of the side (its length by the wall band's
height, in 0.2 m cells, :func:`wall_cover`): a table's edge or the cut where a camera's view ends
is a dense slab too, but a short one. A side with no wall found keeps the footprint's (trimmed)
extreme, and :attr:`RoomGeometry.walled_sides` says how many of the four sides a wall bounds (a
capture that saw part of the room leaves the sides it never saw unbounded, so its size is not the
room's). The footprint is clipped to the walls; its height
is the highest point (the ceiling where it was seen; the cloud is cleaned of outliers before).
The floor area is the area of the convex hull of the floor points (within the floor threshold of
``z = 0``).

>>> import numpy as np
>>> xs, ys = np.meshgrid(np.linspace(0, 4, 21), np.linspace(0, 3, 16))
>>> floor = np.stack([xs.ravel(), ys.ravel(), np.zeros(xs.size)], axis=1)
>>> ceiling = floor + [0, 0, 2.5]
>>> room = measure_room(np.vstack([floor, ceiling]))
>>> round(room.length_m, 3), round(room.width_m, 3), round(room.height_m, 3), round(room.area_m2, 3)
(4.0, 3.0, 2.5, 12.0)
>>> room.walled_sides  # a floor and a ceiling, no wall
0
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.spatial import ConvexHull, QhullError

from assets.dge.objects import dense_slab_position, min_area_rectangle


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
    walled_sides: int = 0  # sides of the room's rectangle bounded by a wall found in the cloud (0-4)


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
    # Column by column (contiguous columns: each quantile partitions one of them).
    local = (
        points[:, 0] * cos_a + points[:, 1] * sin_a,
        -points[:, 0] * sin_a + points[:, 1] * cos_a,
        np.ascontiguousarray(points[:, 2]),
    )
    keep = np.ones(len(points), dtype=bool)
    for axis, column in enumerate(local):
        low, high = np.quantile(column, [trim_share, 1.0 - trim_share])
        if axis == 2:
            low = -np.inf  # the floor is z = 0 by construction
        keep &= (column >= low) & (column <= high)
    return points[keep]


def clip_to_rectangle(polygon: np.ndarray, low: np.ndarray, high: np.ndarray) -> np.ndarray:
    """A convex polygon (counter-clockwise ``(K, 2)`` vertices) clipped to the axis-aligned rectangle ``[low, high]``.

    >>> clip_to_rectangle(np.array([[0, 0], [4, 0], [4, 4], [0, 4.0]]), np.array([1.0, -1]), np.array([3.0, 2])).tolist()
    [[1.0, 2.0], [1.0, 0.0], [3.0, 0.0], [3.0, 2.0]]
    """
    vertices = [np.asarray(vertex, dtype=np.float64) for vertex in polygon]
    for axis, bound, sign in ((0, low[0], 1.0), (0, high[0], -1.0), (1, low[1], 1.0), (1, high[1], -1.0)):
        kept: list[np.ndarray] = []
        for index, current in enumerate(vertices):
            previous = vertices[index - 1]
            current_in = sign * (current[axis] - bound) >= 0
            previous_in = sign * (previous[axis] - bound) >= 0
            if current_in != previous_in:
                t = (bound - previous[axis]) / (current[axis] - previous[axis])
                kept.append(previous + t * (current - previous))
            if current_in:
                kept.append(current)
        vertices = kept
        if not vertices:
            break
    return np.array(vertices, dtype=np.float64).reshape(-1, 2)


def polygon_area(polygon: np.ndarray) -> float:
    """Area of a simple polygon (shoelace formula).

    >>> polygon_area(np.array([[0, 0], [2, 0], [2, 1], [0, 1.0]]))
    2.0
    """
    if len(polygon) < 3:
        return 0.0
    x, y = polygon[:, 0], polygon[:, 1]
    return float(abs(np.dot(x, np.roll(y, -1)) - np.dot(y, np.roll(x, -1))) / 2.0)


def wall_position(
    coordinates: np.ndarray,
    side: int,
    band_m: float = 0.5,
    bin_m: float = 0.02,
    slab_m: float = 0.06,
    min_share: float = 0.2,
    min_points: int = 30,
) -> float | None:
    """Position of the wall at one end of a room axis, or None when no wall stands out.

    ``coordinates`` are the points' coordinates along the axis; ``side`` is +1 for the high end,
    -1 for the low end. The wall is the densest ``slab_m``-thick slab within ``band_m`` of the end
    (:func:`~assets.dge.objects.dense_slab_position`).

    >>> rng = np.random.default_rng(0)
    >>> wall = rng.normal(4.0, 0.03, 3000)
    >>> inside = rng.uniform(0.0, 3.9, 3000)
    >>> round(wall_position(np.concatenate([wall, inside]), +1), 2), wall_position(inside, +1) is None
    (4.0, True)
    """
    return dense_slab_position(coordinates, side, band_m, bin_m, slab_m, min_share, min_points)


def wall_cover(
    along: np.ndarray,
    heights: np.ndarray,
    side_low: float,
    side_high: float,
    band: tuple[float, float],
    cell_m: float = 0.2,
) -> float:
    """Share of a side's ``cell_m`` cells (its length ``side_low..side_high`` by the height ``band``) that points hold.

    ``along`` are the points' coordinates along the side, ``heights`` their heights.

    >>> along, heights = np.meshgrid(np.linspace(0.05, 3.95, 40), np.linspace(0.25, 1.95, 18))
    >>> wall_cover(along.ravel(), heights.ravel(), 0.0, 4.0, (0.2, 2.0)), wall_cover(along.ravel(), heights.ravel(), 0.0, 8.0, (0.2, 2.0))
    (1.0, 0.5)
    """
    columns = max(1, round((side_high - side_low) / cell_m))
    rows = max(1, round((band[1] - band[0]) / cell_m))
    column = np.floor((np.asarray(along) - side_low) / cell_m).astype(np.int64)
    row = np.floor((np.asarray(heights) - band[0]) / cell_m).astype(np.int64)
    inside = (column >= 0) & (column < columns) & (row >= 0) & (row < rows)
    return len(np.unique(row[inside] * columns + column[inside])) / (columns * rows)


def wall_rectangle(
    points: np.ndarray,
    yaw: float,
    height_m: float,
    fallback_low: np.ndarray,
    fallback_high: np.ndarray,
    min_cover: float = 0.25,
    slab_m: float = 0.06,
) -> tuple[np.ndarray, np.ndarray, int]:
    """The room's extent between its walls in the room frame (rotated by ``yaw``): ``(low, high, walls found)``.

    Walls are looked for among the points between 0.2 m and 80% of the room's height (clear of the
    floor, the ceiling and most furniture tops); a dense slab is a wall when the points within
    ``slab_m`` of it cover at least ``min_cover`` of the side (:func:`wall_cover`, the side's length
    being the fallback rectangle's). A side with no wall keeps its fallback.
    """
    cos_a, sin_a = np.cos(yaw), np.sin(yaw)
    local = np.stack(
        [points[:, 0] * cos_a + points[:, 1] * sin_a, -points[:, 0] * sin_a + points[:, 1] * cos_a], axis=1
    )
    band_heights = (0.2, max(0.8 * height_m, 0.3))
    band = (points[:, 2] >= band_heights[0]) & (points[:, 2] <= band_heights[1])
    low, high = np.array(fallback_low, dtype=np.float64), np.array(fallback_high, dtype=np.float64)
    band_local, band_z = local[band], points[band, 2]
    found = 0
    for axis in range(2):
        across = 1 - axis
        for side, bounds in ((-1, low), (+1, high)):
            position = wall_position(band_local[:, axis], side)
            if position is None:
                continue
            on_wall = np.abs(band_local[:, axis] - position) <= slab_m
            cover = wall_cover(
                band_local[on_wall, across],
                band_z[on_wall],
                float(fallback_low[across]),
                float(fallback_high[across]),
                band_heights,
            )
            if cover >= min_cover:
                bounds[axis] = position
                found += 1
    return low, high, found


def measure_room(
    points: np.ndarray, floor_threshold_m: float = 0.03, trim_share: float = 0.0, min_wall_cover: float = 0.25
) -> RoomGeometry:
    """Measure a room from its gravity-frame cloud (floor at ``z = 0``), without ``trim_share`` extremes (see
    :func:`trim_room_points`); length and width run between its walls (:func:`wall_rectangle`, a wall covering
    at least ``min_wall_cover`` of its side)."""
    if len(points) == 0:
        return RoomGeometry(0.0, 0.0, 0.0, 0.0, 0.0, 0.0, np.zeros((0, 2)))
    points = trim_room_points(points, trim_share)
    _, footprint = hull_area(points[:, :2])
    _, _, yaw = min_area_rectangle(footprint if len(footprint) >= 3 else points[:, :2])
    height = max(float(points[:, 2].max()), 0.0)
    cos_a, sin_a = np.cos(yaw), np.sin(yaw)
    rotation = np.array([[cos_a, sin_a], [-sin_a, cos_a]])  # gravity xy -> room frame
    local = points[:, :2] @ rotation.T
    low, high, walled_sides = wall_rectangle(
        points, yaw, height, local.min(axis=0), local.max(axis=0), min_cover=min_wall_cover
    )
    clipped = clip_to_rectangle(footprint @ rotation.T, low, high)
    area, footprint = polygon_area(clipped), clipped @ rotation
    extents = high - low
    if extents[1] > extents[0]:
        extents = extents[::-1]
        yaw += np.pi / 2
    floor_points = points[np.abs(points[:, 2]) <= floor_threshold_m]
    floor_area, _ = hull_area(floor_points[:, :2])
    return RoomGeometry(
        length_m=float(extents[0]),
        width_m=float(extents[1]),
        height_m=height,
        area_m2=area,
        floor_area_m2=floor_area,
        yaw=float(np.mod(yaw, np.pi)),
        footprint=footprint,
        walled_sides=walled_sides,
    )
