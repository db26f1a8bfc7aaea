"""What makes the sample world's ScanNet scans look like real ones (the ``realistic`` scan mode).

The generator renders exact depth, masks and poses; real scans are not exact. In the realistic
mode (the default, ``SampleWorldConfig.scan_realism``) only the ScanNet-like files change, the
truth file keeps the exact geometry:

- depth: Kinect-like noise, Gaussian with a standard deviation that grows with depth
  (``0.0012 + 0.0019 * (z - 0.4)**2`` metres, Nguyen et al. 2012), invalid pixels (0) scattered at
  random and along depth edges, and "flying pixels" on edges (depth between the two sides);
- poses: each recorded camera-to-world pose is the true one moved by a small random rotation and
  translation (registration error), so the fused frames do not line up exactly with the mesh;
- the mesh: every object is the union of several segments (its triangles' vertices grouped by
  cells of ``segment_size_m``), as ScanNet's over-segmentation splits furniture into many pieces,
  and the room's floor, walls and ceiling are annotated objects (``floor``, ``wall``, ``ceiling``),
  as ScanNet's aggregation annotates them.

>>> noise = ScanNoise()
>>> round(float(depth_noise_sigma(np.array([0.4, 3.0]), noise)[1]), 4)
0.014
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import ndimage

REALISM_MODES = ("realistic", "exact")
"""``SampleWorldConfig.scan_realism`` values: realistic scans (default) or the generator's exact ones."""


@dataclass(frozen=True)
class ScanNoise:
    """How far the realistic scans are from the exact geometry.

    Args:
        depth_sigma_base_m, depth_sigma_quadratic (`float`): depth noise ``base + quadratic * (z - 0.4)**2``.
        hole_fraction (`float`): share of depth pixels dropped at random (0 = missing).
        edge_hole_fraction (`float`): share of depth-edge pixels dropped.
        flying_pixel_fraction (`float`): share of the remaining depth-edge pixels set between the two sides.
        edge_jump_m (`float`): a pixel is on a depth edge when its 3x3 neighbourhood spans more than this
            (plus 5% of its depth).
        pose_translation_m (`float`): standard deviation of the registration error per axis (metres).
        pose_rotation_deg (`float`): standard deviation of the registration error's rotation angle.
        segment_size_m (`float`): mesh segments are cells of this size (metres).
    """

    depth_sigma_base_m: float = 0.0012
    depth_sigma_quadratic: float = 0.0019
    hole_fraction: float = 0.02
    edge_hole_fraction: float = 0.5
    flying_pixel_fraction: float = 0.3
    edge_jump_m: float = 0.05
    pose_translation_m: float = 0.004
    pose_rotation_deg: float = 0.25
    segment_size_m: float = 0.3


def depth_noise_sigma(depth_m: np.ndarray, noise: ScanNoise) -> np.ndarray:
    """Standard deviation of the depth noise at each depth (metres)."""
    return noise.depth_sigma_base_m + noise.depth_sigma_quadratic * (np.asarray(depth_m) - 0.4) ** 2


def noisy_depth(depth_m: np.ndarray, rng: np.random.Generator, noise: ScanNoise) -> np.ndarray:
    """A Kinect-like copy of an exact depth image (metres; 0 = missing).

    >>> exact = np.full((20, 20), 2.0); exact[:, 10:] = 3.0
    >>> noisy = noisy_depth(exact, np.random.default_rng(0), ScanNoise())
    >>> bool(abs(np.median(noisy[noisy > 0][:50]) - 2.0) < 0.02), bool((noisy == 0).any())
    (True, True)
    """
    depth = np.asarray(depth_m, dtype=np.float64)
    valid = depth > 0
    near = ndimage.minimum_filter(np.where(valid, depth, np.inf), size=3)
    far = ndimage.maximum_filter(np.where(valid, depth, 0.0), size=3)
    edge = valid & np.isfinite(near) & (far - near > noise.edge_jump_m + 0.05 * depth)
    result = depth + rng.normal(size=depth.shape) * depth_noise_sigma(depth, noise)
    draw = rng.uniform(size=depth.shape)
    flying = edge & (draw < noise.flying_pixel_fraction)
    mix = rng.uniform(0.2, 0.8, size=depth.shape)
    result = np.where(flying, near + mix * (far - near), result)
    holes = (rng.uniform(size=depth.shape) < noise.hole_fraction) | (
        edge & ~flying & (draw < noise.flying_pixel_fraction + noise.edge_hole_fraction)
    )
    return np.where(valid & ~holes, np.maximum(result, 0.0), 0.0)


def misregistered_pose(pose: np.ndarray, rng: np.random.Generator, noise: ScanNoise) -> np.ndarray:
    """The true camera-to-world pose moved by a small random rotation (about the camera centre) and translation.

    >>> moved = misregistered_pose(np.eye(4), np.random.default_rng(0), ScanNoise())
    >>> bool(np.allclose(moved[:3, :3] @ moved[:3, :3].T, np.eye(3))), bool(0 < np.abs(moved[:3, 3]).max() < 0.03)
    (True, True)
    """
    axis = rng.normal(size=3)
    axis /= max(float(np.linalg.norm(axis)), 1e-12)
    angle = math.radians(noise.pose_rotation_deg) * float(rng.normal())
    cross = np.array([[0, -axis[2], axis[1]], [axis[2], 0, -axis[0]], [-axis[1], axis[0], 0]])
    rotation = np.eye(3) + math.sin(angle) * cross + (1 - math.cos(angle)) * cross @ cross
    moved = np.array(pose, dtype=np.float64)
    moved[:3, :3] = rotation @ moved[:3, :3]
    moved[:3, 3] = moved[:3, 3] + rng.normal(size=3) * noise.pose_translation_m
    return moved


def vertex_segments(vertices: np.ndarray, cell_m: float) -> np.ndarray:
    """Segment number (0-based, in order of first appearance) of each vertex: its cell of side ``cell_m``.

    >>> vertex_segments(np.array([[0.0, 0, 0], [0.1, 0, 0], [0.5, 0, 0], [0.05, 0.01, 0]]), 0.3).tolist()
    [0, 0, 1, 0]
    """
    cells = np.floor(np.asarray(vertices) / cell_m).astype(np.int64)
    _, first, inverse = np.unique(cells, axis=0, return_index=True, return_inverse=True)
    order = np.argsort(np.argsort(first))  # renumber cells by first appearance
    return order[inverse.reshape(-1)]
