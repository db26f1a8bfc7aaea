"""Helpers shared by the sample world tests."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from assets.sample_world import SampleWorldConfig, SampleWorldSummary


def small_config(root: Path, **overrides) -> SampleWorldConfig:
    """A small world: 2 scenes x 3 views at 64x48 (min_question_pixels lowered to fit the size)."""
    fields = {
        "root": root,
        "seed": 3,
        "num_scenes": 2,
        "views_per_scene": 3,
        "width": 64,
        "height": 48,
        "min_question_pixels": 20,
        "camera_path": "loop",
        "show_progress": False,
    }
    fields.update(overrides)
    return SampleWorldConfig(**fields)


@dataclass(frozen=True)
class World:
    """A generated world, its summary and its parsed truth file."""

    root: Path
    config: SampleWorldConfig
    summary: SampleWorldSummary
    truth: dict

    def scene(self, scene_id: str) -> dict:
        """The truth record of one scene."""
        return next(scene for scene in self.truth["scenes"] if scene["scene_id"] == scene_id)

    def views(self):
        """`(scene truth, view truth)` for every view."""
        for scene in self.truth["scenes"]:
            for view in scene["views"]:
                yield scene, view


def read_matrix(path: Path) -> np.ndarray:
    """A ScanNet matrix text file."""
    return np.loadtxt(path, dtype=np.float64)


def pixel_directions(intrinsics: np.ndarray, rotation: np.ndarray, width: int, height: int) -> np.ndarray:
    """World ray directions `(height * width, 3)` through pixel centres, camera-z component 1, row-major."""
    grid_u, grid_v = np.meshgrid(np.arange(width, dtype=np.float64), np.arange(height, dtype=np.float64))
    camera = np.stack(
        [
            (grid_u.ravel() - intrinsics[0, 2]) / intrinsics[0, 0],
            (grid_v.ravel() - intrinsics[1, 2]) / intrinsics[1, 1],
            np.ones(width * height),
        ],
        axis=1,
    )
    return camera @ rotation.T


def camera_frame(point: list[float], pose: np.ndarray) -> np.ndarray:
    """A world point in camera coordinates."""
    return (np.asarray(point, dtype=np.float64) - pose[:3, 3]) @ pose[:3, :3]
