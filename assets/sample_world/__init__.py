"""The sample world: synthetic indoor scenes rendered by ray casting, written in real data formats.

Rooms with everyday objects (tables, chairs, mugs, lamps, ...) are rendered with open3d's
`RaycastingScene` from several camera views (exact z-depth, instance masks, shaded colour) and
written as OmniSpatial-, SpatiaLab-, Visual-Genome-, ScanNet- and COCO-like files, plus an exact
truth file (`truth/world.json`), so every source asset reads it exactly as it reads real data.

>>> from assets.sample_world import SampleWorldConfig, generate_sample_world
>>> config = SampleWorldConfig(num_scenes=2, views_per_scene=2)
>>> config.depth_width, config.depth_height
(160, 120)
"""

from assets.sample_world.config import GENERATOR_VERSION, SampleWorldConfig, default_root
from assets.sample_world.generator import (
    SampleWorldSummary,
    ensure_sample_world,
    generate_sample_world,
    world_paths,
)

__all__ = [
    "GENERATOR_VERSION",
    "SampleWorldConfig",
    "SampleWorldSummary",
    "default_root",
    "ensure_sample_world",
    "generate_sample_world",
    "world_paths",
]
