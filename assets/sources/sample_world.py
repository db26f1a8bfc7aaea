"""The ``sample_world`` asset: the built-in synthetic world every source reads by default.

It renders synthetic indoor scenes with open3d ray casting and writes them in the real on-disk
formats (OmniSpatial-like, SpatiaLab-like, Visual-Genome-like, ScanNet-, ARKitScenes- and ScanNet++-like
scans, COCO instances), so the
whole graph runs on a fresh machine with no keys, weights or downloads. A rebuild with the same
configuration is skipped: the generator is deterministic, and its output folder records the
configuration it was built from and a manifest of every file (size and SHA-256), so a damaged or
half-written world is rebuilt.
"""

import dataclasses
import hashlib
import json
from pathlib import Path
from typing import Any

import dagster as dg
from pydantic import Field

from assets.resources import SourcesResource, StorageResource
from assets.sample_world import SampleWorldConfig, ensure_sample_world
from assets.sample_world.config import (
    DEFAULT_WORLD_ARKITSCENES_VIDEOS,
    DEFAULT_WORLD_CAMERA_PATH,
    DEFAULT_WORLD_SCANNETPP_SCENES,
    GENERATOR_VERSION,
)
from assets.sample_world.generator import stamp_config

_DEFAULTS: dict[str, Any] = {field.name: field.default for field in dataclasses.fields(SampleWorldConfig)}
"""The generator's own defaults: the asset's knobs default to them (the default world adds its other layouts' rooms)."""


class SampleWorldAssetConfig(dg.Config):
    """Run configuration of the `sample_world` asset (the generator's main knobs)."""

    seed: int = Field(default=_DEFAULTS["seed"], description="Seed of every random choice.")
    num_scenes: int = Field(default=_DEFAULTS["num_scenes"], description="Number of rooms.")
    views_per_scene: int = Field(
        default=_DEFAULTS["views_per_scene"], description="Camera views (RGB-D frames) per room."
    )
    width: int = Field(default=_DEFAULTS["width"], description="Colour image width in pixels.")
    height: int = Field(default=_DEFAULTS["height"], description="Colour image height in pixels.")
    camera_path: str = Field(
        default=DEFAULT_WORLD_CAMERA_PATH,
        description="'mixed' (the default world): the rooms take the four paths below in turn, so the DGE asks "
        "every task type and answer value; 'loop': the camera walks once around each room looking inward; "
        "'handheld': it walks toward or across the room and pans in place, so cameras stand behind each other and "
        "turn (camera_motion asks 'turned left/right', camera_camera_position 'behind'); 'partial': the loop's "
        "first third, a capture of part of the room (room_size is then withheld: the walls behind the cameras are "
        "never seen); 'lookaround': the camera turns once around on the spot near the room's centre "
        "(camera_object_position asks 'behind').",
    )
    arkitscenes_videos: int = Field(
        default=DEFAULT_WORLD_ARKITSCENES_VIDEOS,
        description="Further rooms written as ARKitScenes 3dod videos (frames stored rotated by their sky direction, "
        "a world-to-camera trajectory, oriented-box annotations).",
    )
    scannetpp_scenes: int = Field(
        default=DEFAULT_WORLD_SCANNETPP_SCENES,
        description="Further rooms written as ScanNet++ scenes (the iPhone stream as the toolkit extracts it, the "
        "aligned mesh and its segment annotation).",
    )
    scan_realism: str = Field(
        default=_DEFAULTS["scan_realism"],
        description="'realistic': Kinect-like depth noise and holes, pose errors, an over-segmented mesh; 'exact': "
        "the generator's exact geometry.",
    )
    force: bool = Field(
        default=False, description="Rebuild even when the folder already holds this configuration."
    )


def build_sample_world(root: Path, config: SampleWorldAssetConfig) -> tuple[dict, bool, str]:
    """Generate the sample world into ``root`` unless it already holds the same configuration, complete.

    A world is reused only when its stamp names this configuration and every file matches the stamp's
    manifest (see :func:`assets.sample_world.ensure_sample_world`). Returns ``(summary, rebuilt,
    version)``; the version is a hash of the configuration.
    """
    world_config = SampleWorldConfig(
        root=root,
        seed=config.seed,
        num_scenes=config.num_scenes,
        views_per_scene=config.views_per_scene,
        width=config.width,
        height=config.height,
        camera_path=config.camera_path,
        arkitscenes_videos=config.arkitscenes_videos,
        scannetpp_scenes=config.scannetpp_scenes,
        scan_realism=config.scan_realism,
        show_progress=False,
    )
    version = hashlib.sha256(json.dumps(stamp_config(world_config), sort_keys=True).encode()).hexdigest()[:16]
    summary, rebuilt = ensure_sample_world(world_config, force=config.force)
    return json.loads(json.dumps(summary.as_dict(), default=str)), rebuilt, version


@dg.multi_asset(
    name="sample_world_asset",
    outs={
        "sample_world": dg.AssetOut(
            description="Synthetic indoor scenes (exact depth, instance masks, poses) written in the real source "
            "formats.",
            code_version=GENERATOR_VERSION,
        )
    },
    group_name="sources",
)
def sample_world(
    context: dg.AssetExecutionContext,
    config: SampleWorldAssetConfig,
    sources: SourcesResource,
    storage: StorageResource,
) -> dg.MaterializeResult:
    """Synthetic indoor scenes (exact depth, instance masks, poses) written in the real source formats."""
    root = sources.sample_world(storage)
    summary, rebuilt, version = build_sample_world(root, config)
    context.log.info("sample world at %s (%s)", root, "built" if rebuilt else "unchanged, skipped")
    return dg.MaterializeResult(
        metadata={
            "path": dg.MetadataValue.path(str(root)),
            "rebuilt": rebuilt,
            "summary": dg.MetadataValue.json(summary),
        },
        data_version=dg.DataVersion(version),
    )
