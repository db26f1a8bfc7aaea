"""Pinhole camera helpers shared by the DGE modules: matrices, rigidity, projection, back-projection.

Conventions (the project's, see the sample world layout): OpenCV cameras (x right, y down, z
forward), poses are 4x4 camera-to-world transforms, intrinsics are 3x3 ``[[fx, 0, cx], [0, fy, cy],
[0, 0, 1]]`` stored row-major as 9 numbers.

>>> import numpy as np
>>> K = intrinsics_matrix([100, 0, 50, 0, 100, 40, 0, 0, 1])
>>> uv, z = project_points(np.array([[0.0, 0.0, 2.0]]), K)
>>> uv.tolist(), z.tolist()
([[50.0, 40.0]], [2.0])
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def intrinsics_matrix(values: Sequence[float]) -> np.ndarray:
    """A 3x3 intrinsics matrix from 9 row-major numbers (or a 3x3 / 4x4 array).

    >>> float(intrinsics_matrix([500, 0, 320, 0, 500, 240, 0, 0, 1])[0, 2])
    320.0
    """
    array = np.asarray(values, dtype=np.float64)
    if array.shape == (4, 4):
        return array[:3, :3].copy()
    return array.reshape(3, 3)


def pose_matrix(values: Sequence[float]) -> np.ndarray:
    """A 4x4 pose from 16 row-major numbers.

    >>> pose_matrix(np.eye(4).reshape(-1)).shape
    (4, 4)
    """
    return np.asarray(values, dtype=np.float64).reshape(4, 4)


def invert_rigid(transform: np.ndarray) -> np.ndarray:
    """Inverse of a rigid 4x4 transform (transpose of the rotation, rotated translation).

    >>> t = np.eye(4); t[:3, 3] = [1, 2, 3]
    >>> invert_rigid(t)[:3, 3].tolist()
    [-1.0, -2.0, -3.0]
    """
    rotation = transform[:3, :3]
    inverse = np.eye(4)
    inverse[:3, :3] = rotation.T
    inverse[:3, 3] = -rotation.T @ transform[:3, 3]
    return inverse


def transform_points(transform: np.ndarray, points: np.ndarray) -> np.ndarray:
    """Apply a 4x4 transform to ``(N, 3)`` points.

    >>> t = np.eye(4); t[:3, 3] = [0, 0, 1]
    >>> transform_points(t, np.zeros((1, 3))).tolist()
    [[0.0, 0.0, 1.0]]
    """
    if points.size == 0:
        return points.reshape(0, 3)
    return _apply_linear(points, transform[:3, :3], transform[:3, 3])


def rotate_vectors(transform: np.ndarray, vectors: np.ndarray) -> np.ndarray:
    """Apply only the rotation part of a 4x4 transform to ``(N, 3)`` direction vectors."""
    if vectors.size == 0:
        return vectors.reshape(0, 3)
    return _apply_linear(vectors, transform[:3, :3], None)


def _apply_linear(points: np.ndarray, matrix: np.ndarray, offset: np.ndarray | None) -> np.ndarray:
    """``points @ matrix.T (+ offset)`` with element-wise arithmetic.

    For tall ``(N, 3)`` arrays this is several times faster than a BLAS call and never starts
    BLAS threads (which oversubscribe small machines).
    """
    out = np.empty(points.shape, dtype=np.result_type(points.dtype, np.float32))
    x, y, z = points[:, 0], points[:, 1], points[:, 2]
    for row in range(3):
        out[:, row] = x * matrix[row, 0] + y * matrix[row, 1] + z * matrix[row, 2]
        if offset is not None:
            out[:, row] += offset[row]
    return out


def project_points(points_camera: np.ndarray, intrinsics: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Project camera-frame points to pixel coordinates; returns ``(uv (N, 2), depth z (N,))``.

    Points at or behind the camera get non-finite coordinates; callers mask them with ``z > 0``.
    """
    z = points_camera[:, 2]
    with np.errstate(divide="ignore", invalid="ignore"):
        u = intrinsics[0, 0] * points_camera[:, 0] / z + intrinsics[0, 2]
        v = intrinsics[1, 1] * points_camera[:, 1] / z + intrinsics[1, 2]
    return np.stack([u, v], axis=1), z


def backproject_depth(
    depth_m: np.ndarray, intrinsics: np.ndarray, stride: int = 1
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Back-project the valid pixels of a metric depth image to camera-frame points.

    Returns ``(points (N, 3), rows (N,), cols (N,))`` for pixels with finite depth > 0, sampling
    every ``stride``-th row and column. Pixel centres are at integer coordinates (the convention
    of the intrinsics files).

    >>> pts, rows, cols = backproject_depth(np.full((2, 2), 2.0), intrinsics_matrix([1, 0, 0, 0, 1, 0, 0, 0, 1]))
    >>> pts[-1].tolist()
    [2.0, 2.0, 2.0]
    """
    sampled = depth_m[::stride, ::stride]
    rows, cols = np.nonzero(np.isfinite(sampled) & (sampled > 0))
    z = sampled[rows, cols].astype(np.float64)
    rows = rows * stride
    cols = cols * stride
    x = (cols - intrinsics[0, 2]) * z / intrinsics[0, 0]
    y = (rows - intrinsics[1, 2]) * z / intrinsics[1, 1]
    return np.stack([x, y, z], axis=1), rows, cols


def depth_normals_camera(
    depth_m: np.ndarray, intrinsics: np.ndarray, stride: int = 1, max_relative_jump: float = 0.1
) -> np.ndarray:
    """Per-pixel surface normals (camera frame, facing the camera) from a depth image, at ``stride``.

    Normals come from central differences of the back-projected grid; pixels whose neighbours are
    missing, or differ in depth by more than ``max_relative_jump`` times the depth, get a NaN
    normal. Returns an ``(H', W', 3)`` array on the strided grid (see :func:`depth_normals_at`).

    >>> normals = depth_normals_camera(np.full((5, 5), 2.0), intrinsics_matrix([10, 0, 2, 0, 10, 2, 0, 0, 1]))
    >>> [round(float(v), 6) + 0.0 for v in normals[2, 2]]
    [0.0, 0.0, -1.0]
    """
    height, width = depth_m[::stride, ::stride].shape
    rows, cols = (axis.ravel() * stride for axis in np.mgrid[0:height, 0:width])
    return depth_normals_at(depth_m, intrinsics, rows, cols, stride, max_relative_jump).reshape(
        height, width, 3
    )


def depth_normals_at(
    depth_m: np.ndarray,
    intrinsics: np.ndarray,
    rows: np.ndarray,
    cols: np.ndarray,
    stride: int = 1,
    max_relative_jump: float = 0.1,
) -> np.ndarray:
    """Surface normals (camera frame, facing the camera) at pixels ``(rows, cols)`` of the ``stride`` grid.

    The normal at a pixel is the cross product of the central differences of the back-projected
    grid (its neighbours ``stride`` pixels left and right, above and below); pixels on the grid's
    border, with a missing neighbour, or whose neighbours differ in depth by more than
    ``max_relative_jump`` times the depth get NaN. Returns ``(N, 3)``.

    >>> k = intrinsics_matrix([10, 0, 2, 0, 10, 2, 0, 0, 1])
    >>> normals = depth_normals_at(np.full((5, 5), 2.0), k, np.array([2, 0]), np.array([2, 2]))
    >>> [round(float(v), 6) + 0.0 for v in normals[0]], bool(np.isnan(normals[1]).all())
    ([0.0, 0.0, -1.0], True)
    """
    rows, cols = np.asarray(rows, dtype=np.int64), np.asarray(cols, dtype=np.int64)
    normals = np.full((len(rows), 3), np.nan)
    height, width = depth_m.shape
    last_row, last_col = (height - 1) // stride * stride, (width - 1) // stride * stride
    interior = np.flatnonzero((rows >= stride) & (rows < last_row) & (cols >= stride) & (cols < last_col))
    rows, cols = rows[interior], cols[interior]
    # The strided grid's depths, NaN where missing, read once (each neighbour is a gather from this small array).
    sampled = depth_m[::stride, ::stride].astype(np.float64)
    with np.errstate(invalid="ignore"):
        grid_z = np.where(np.isfinite(sampled) & (sampled > 0), sampled, np.nan)
    grid_width = grid_z.shape[1]
    fx, fy, cx, cy = intrinsics[0, 0], intrinsics[1, 1], intrinsics[0, 2], intrinsics[1, 2]
    flat_z = grid_z.ravel()
    cells = rows // stride * grid_width + cols // stride

    def camera_point(d_row: int, d_col: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        z = flat_z[cells + (d_row * grid_width + d_col)]
        return (
            (cols + d_col * stride - cx) * z / fx,
            (rows + d_row * stride - cy) * z / fy,
            z,
        )

    unit = _facing_normals(
        camera_point(0, 0),
        (camera_point(0, -1), camera_point(0, 1)),
        (camera_point(-1, 0), camera_point(1, 0)),
        max_relative_jump,
    )
    for index, axis in enumerate(unit):
        normals[interior, index] = axis
    return normals


Coordinates = tuple[np.ndarray, np.ndarray, np.ndarray]


def _facing_normals(
    centre: Coordinates,
    left_right: tuple[Coordinates, Coordinates],
    up_down: tuple[Coordinates, Coordinates],
    max_relative_jump: float,
) -> list[np.ndarray]:
    """Unit normals facing the camera from back-projected pixels and their four neighbours (x, y, z arrays of one
    shape); NaN where a neighbour is missing or lies across a depth jump (see :func:`depth_normals_at`)."""
    (left, right), (up, down) = left_right, up_down
    du = [after - before for before, after in zip(left, right, strict=True)]
    dv = [after - before for before, after in zip(up, down, strict=True)]
    # A neighbour on another surface (a depth jump) would tilt the normal: drop those pixels.
    with np.errstate(invalid="ignore"):
        jump = (np.abs(du[2]) > max_relative_jump * centre[2]) | (
            np.abs(dv[2]) > max_relative_jump * centre[2]
        )
    du = [np.where(jump, np.nan, axis) for axis in du]
    cross = (
        du[1] * dv[2] - du[2] * dv[1],
        du[2] * dv[0] - du[0] * dv[2],
        du[0] * dv[1] - du[1] * dv[0],
    )
    norm = np.sqrt(cross[0] * cross[0] + cross[1] * cross[1] + cross[2] * cross[2])
    with np.errstate(divide="ignore", invalid="ignore"):
        unit = [axis / norm for axis in cross]
        facing = unit[0] * centre[0] + unit[1] * centre[1] + unit[2] * centre[2] > 0
    return [np.where(facing, -axis, axis) for axis in unit]
